import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { CriClient, CriError, GrpcStatus as status } from './client.js';

describe('proto/cri.proto', () => {
  const root = new protobuf.Root().loadSync(fileURLToPath(new URL('../../proto/cri.proto', import.meta.url)), { keepCase: true });
  const fieldNumbers = (message: string) => Object.fromEntries(root.lookupType(`runtime.v1.${message}`).fieldsArray.map((field) => [field.name, field.id]));

  // Wrong numbers do not fail loudly: the runtime silently sees empty fields.
  it('keeps the upstream runtime.v1 field numbers', () => {
    expect(fieldNumbers('ImageSpec')).toEqual({ image: 1, annotations: 2 });
    expect(fieldNumbers('AuthConfig')).toEqual({ username: 1, password: 2, auth: 3, server_address: 4, identity_token: 5, registry_token: 6 });
    expect(fieldNumbers('PullImageRequest')).toEqual({ image: 1, auth: 2, sandbox_config: 3 });
    expect(fieldNumbers('PullImageResponse')).toEqual({ image_ref: 1 });
    expect(fieldNumbers('PodSandboxConfig')).toEqual({ metadata: 1 });
    expect(fieldNumbers('PodSandboxMetadata')).toEqual({ name: 1, uid: 2, namespace: 3, attempt: 4 });
    expect(fieldNumbers('ImageStatusRequest')).toEqual({ image: 1, verbose: 2 });
    expect(fieldNumbers('ImageStatusResponse')).toEqual({ image: 1, info: 2 });
    expect(fieldNumbers('ListImagesRequest')).toEqual({ filter: 1 });
    expect(fieldNumbers('ImageFilter')).toEqual({ image: 1 });
    expect(fieldNumbers('ListImagesResponse')).toEqual({ images: 1 });
    expect(fieldNumbers('Image')).toEqual({ id: 1, repo_tags: 2, repo_digests: 3, size: 4, uid: 5, username: 6, spec: 7, pinned: 8 });
    expect(fieldNumbers('RemoveImageRequest')).toEqual({ image: 1 });
    expect(fieldNumbers('ImageFsInfoResponse')).toEqual({ image_filesystems: 1, container_filesystems: 2 });
    expect(fieldNumbers('FilesystemUsage')).toEqual({ timestamp: 1, fs_id: 2, used_bytes: 3, inodes_used: 4 });
    expect(fieldNumbers('FilesystemIdentifier')).toEqual({ mountpoint: 1 });
    expect(fieldNumbers('UInt64Value')).toEqual({ value: 1 });
    expect(fieldNumbers('VersionRequest')).toEqual({ version: 1 });
    expect(fieldNumbers('VersionResponse')).toEqual({ version: 1, runtime_name: 2, runtime_version: 3, runtime_api_version: 4 });
  });
});

describe('CriClient.connect', () => {
  it('fails at once with UNAVAILABLE when no runtime listens on the socket', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-cri-'));
    try {
      const missing = CriClient.connect(join(dir, 'crio.sock'));
      await expect(missing).rejects.toBeInstanceOf(CriError);
      await expect(missing).rejects.toMatchObject({ code: status.UNAVAILABLE, message: expect.stringContaining('ENOENT') });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('gives up after the connect timeout when the socket accepts but never speaks gRPC', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-cri-'));
    const socketPath = join(dir, 'silent.sock');
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(socketPath, resolve));
    try {
      // The rejection is the proof: without the timeout, connect would wait on the silent socket for ever.
      await expect(CriClient.connect(socketPath, { connectTimeoutMs: 300 })).rejects.toMatchObject({ code: status.UNAVAILABLE });
    } finally {
      silent.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
