/**
 * A minimal CRI client: the image half of the Kubernetes Container Runtime Interface plus
 * `RuntimeService/Version`, spoken over gRPC on the runtime's unix socket (CRI-O, containerd).
 * The node agent uses it to pull, inspect and count images; it never talks to a registry itself.
 * Messages are encoded by protobufjs from proto/cri.proto; the calls are unary gRPC on Node's
 * http2 (grpc-unary.ts).
 */
import { createRequire } from 'node:module';
import { connect as connectSocket } from 'node:net';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs/light.js';
import { ClusterError } from '../errors.js';
import { GrpcCallError, GrpcStatus, UnaryChannel, type GrpcStatusCode } from './grpc-unary.js';

export { GrpcStatus, type GrpcStatusCode } from './grpc-unary.js';

/**
 * The CRI proto as protobufjs JSON, inlined in the bundles (scripts/node-bundle.ts), which have
 * no proto file to read and may run on a read-only root; the package's proto/ file otherwise,
 * parsed by protobufjs' full build (loaded only then).
 */
declare const __PRESTAGE_CRI_PROTO_JSON__: string | undefined;

function loadProto(): protobuf.Root {
  if (typeof __PRESTAGE_CRI_PROTO_JSON__ === 'string') return protobuf.Root.fromJSON(JSON.parse(__PRESTAGE_CRI_PROTO_JSON__) as protobuf.INamespace);
  const full = createRequire(import.meta.url)('protobufjs') as typeof import('protobufjs');
  return full.loadSync(fileURLToPath(new URL('../../proto/cri.proto', import.meta.url)));
}

/** Ordinary calls answer in milliseconds; a runtime that takes this long is stuck. */
const DEFAULT_CALL_TIMEOUT_MS = 30_000;
/** A pull of a multi-GiB image over a slow link legitimately takes many minutes. */
const DEFAULT_PULL_TIMEOUT_MS = 30 * 60_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Image lists on a node with hundreds of images can exceed gRPC's usual 4 MiB. */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** A CRI call failed; `code` is the gRPC status (e.g. `GrpcStatus.NOT_FOUND`). */
export class CriError extends ClusterError {
  constructor(
    message: string,
    readonly code: GrpcStatusCode,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface RuntimeVersion {
  /** The CRI version the runtime speaks, e.g. `v1`. */
  readonly runtimeApiVersion: string;
  /** e.g. `cri-o`. */
  readonly runtimeName: string;
  /** e.g. `1.34.0`. */
  readonly runtimeVersion: string;
}

/** An image in the runtime's store, as CRI reports it. */
export interface RuntimeImage {
  /** Storage ID: the config digest's hex for CRI-O. */
  readonly id: string;
  readonly repoTags: readonly string[];
  /** `repo@sha256:...`: the names a digest pull stores the image under. */
  readonly repoDigests: readonly string[];
  /** Bytes on disk (uncompressed), as the runtime counts them. */
  readonly size: number;
  /** Pinned images are exempt from the kubelet's image garbage collection. */
  readonly pinned: boolean;
}

export interface FilesystemUsage {
  readonly mountpoint: string;
  readonly usedBytes: number;
  readonly inodesUsed: number;
}

export interface ImageFsInfo {
  readonly imageFilesystems: readonly FilesystemUsage[];
  readonly containerFilesystems: readonly FilesystemUsage[];
}

/** Registry credentials passed through to the runtime for one pull. */
export interface PullAuth {
  readonly username?: string;
  readonly password?: string;
  /** base64(`user:password`), as in a pull secret. */
  readonly auth?: string;
  readonly identityToken?: string;
  readonly registryToken?: string;
  readonly serverAddress?: string;
}

export interface PullOptions {
  readonly auth?: PullAuth;
  /** The pod namespace the pull is made for: CRI-O selects a per-namespace signature policy by it. */
  readonly namespace?: string;
  readonly timeoutMs?: number;
  /** Cancels the call (the runtime sees the client go away and stops the pull). */
  readonly signal?: AbortSignal;
}

export interface ConnectOptions {
  readonly connectTimeoutMs?: number;
  readonly callTimeoutMs?: number;
}

// Wire shapes as DECODED gives them (camelCase, int64 as string, defaults filled).
interface WireImage {
  id: string;
  repoTags: string[];
  repoDigests: string[];
  size: string;
  pinned: boolean;
}
interface WireFilesystemUsage {
  fsId: { mountpoint: string } | null;
  usedBytes: { value: string } | null;
  inodesUsed: { value: string } | null;
}

/** Each call's request and answer types (proto/cri.proto) and its path. */
const METHODS = {
  version: ['RuntimeService', 'Version'],
  pullImage: ['ImageService', 'PullImage'],
  imageStatus: ['ImageService', 'ImageStatus'],
  listImages: ['ImageService', 'ListImages'],
  removeImage: ['ImageService', 'RemoveImage'],
  imageFsInfo: ['ImageService', 'ImageFsInfo'],
} as const;
type Method = keyof typeof METHODS;

interface Codec {
  readonly path: string;
  readonly request: protobuf.Type;
  readonly response: protobuf.Type;
}

let codecs: Record<Method, Codec> | undefined;

function loadCodecs(): Record<Method, Codec> {
  if (!codecs) {
    const root = loadProto();
    const codec = ([service, name]: readonly [string, string]): Codec => {
      const method = root.lookupService(`runtime.v1.${service}`).methods[name]!;
      return { path: `/runtime.v1.${service}/${name}`, request: root.lookupType(method.requestType), response: root.lookupType(method.responseType) };
    };
    codecs = Object.fromEntries(Object.entries(METHODS).map(([method, at]) => [method, codec(at)])) as Record<Method, Codec>;
  }
  return codecs;
}

/** Answers as objects: int64 as strings, enums by name, defaults filled (null for an absent message). */
const DECODED: protobuf.IConversionOptions = { longs: String, enums: String, defaults: true };

export class CriClient {
  private constructor(
    readonly socketPath: string,
    private readonly channel: UnaryChannel,
    private readonly callTimeoutMs: number,
  ) {}

  /** Connects to a runtime socket (`/var/run/crio/crio.sock`) and waits until the runtime speaks HTTP/2. */
  static async connect(socketPath: string, options: ConnectOptions = {}): Promise<CriClient> {
    const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const unreachable = (error: unknown) =>
      new CriError(`cannot reach the container runtime at ${socketPath}: ${(error as Error).message}`, GrpcStatus.UNAVAILABLE, { cause: error });
    // A plain socket first: a missing or refusing socket is named as such, at once.
    await probeSocket(socketPath, connectTimeoutMs).catch((error: unknown) => {
      throw unreachable(error);
    });
    loadCodecs();
    const channel = new UnaryChannel(socketPath, MAX_ANSWER_BYTES);
    try {
      await channel.ready(connectTimeoutMs);
    } catch (error) {
      channel.close();
      throw unreachable(error);
    }
    return new CriClient(socketPath, channel, options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS);
  }

  async version(): Promise<RuntimeVersion> {
    const response = await this.call<{ runtimeName: string; runtimeVersion: string; runtimeApiVersion: string }>('version', { version: 'v1' });
    return {
      runtimeName: response.runtimeName,
      runtimeVersion: response.runtimeVersion,
      runtimeApiVersion: response.runtimeApiVersion,
    };
  }

  /**
   * Pulls an image; resolves to the runtime's reference for what it stored (CRI-O 1.34: the
   * canonical `repo@sha256:` name; containerd: the image ID).
   */
  async pullImage(image: string, options: PullOptions = {}): Promise<string> {
    const request = {
      image: { image },
      auth: options.auth ?? null,
      // Some runtimes dereference the sandbox config unconditionally: never send it null.
      sandboxConfig: { metadata: { name: 'prestage-pull', uid: '', namespace: options.namespace ?? '', attempt: 0 } },
    };
    const response = await this.call<{ imageRef: string }>(
      'pullImage',
      request,
      options.timeoutMs ?? DEFAULT_PULL_TIMEOUT_MS,
      `pull ${image}`,
      options.signal,
    );
    return response.imageRef;
  }

  /** The image as stored, or null when the runtime does not have it. */
  async imageStatus(image: string): Promise<RuntimeImage | null> {
    const response = await this.call<{ image: WireImage | null }>('imageStatus', { image: { image }, verbose: false });
    return response.image ? toRuntimeImage(response.image) : null;
  }

  async listImages(): Promise<RuntimeImage[]> {
    const response = await this.call<{ images: WireImage[] }>('listImages', {});
    return response.images.map(toRuntimeImage);
  }

  async removeImage(image: string): Promise<void> {
    await this.call('removeImage', { image: { image } }, undefined, `remove ${image}`);
  }

  async imageFsInfo(): Promise<ImageFsInfo> {
    const response = await this.call<{
      imageFilesystems: WireFilesystemUsage[];
      containerFilesystems: WireFilesystemUsage[];
    }>('imageFsInfo', {});
    return {
      imageFilesystems: response.imageFilesystems.map(toFilesystemUsage),
      containerFilesystems: response.containerFilesystems.map(toFilesystemUsage),
    };
  }

  close(): void {
    this.channel.close();
  }

  private async call<Res>(method: Method, request: object, timeoutMs?: number, what?: string, signal?: AbortSignal): Promise<Res> {
    const codec = loadCodecs()[method];
    const bytes = codec.request.encode(codec.request.fromObject(request)).finish();
    try {
      const answer = await this.channel.call(codec.path, bytes, { timeoutMs: timeoutMs ?? this.callTimeoutMs, ...(signal ? { signal } : {}) });
      return codec.response.toObject(codec.response.decode(answer), DECODED) as Res;
    } catch (error) {
      const code = error instanceof GrpcCallError ? error.code : GrpcStatus.INTERNAL;
      const details = error instanceof GrpcCallError ? error.details : (error as Error).message;
      throw new CriError(`CRI ${what ?? method} on ${this.socketPath} failed: ${details}`, code, { cause: error });
    }
  }
}

function probeSocket(socketPath: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connectSocket(socketPath);
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

function toRuntimeImage(wire: WireImage): RuntimeImage {
  return {
    id: wire.id,
    repoTags: wire.repoTags,
    repoDigests: wire.repoDigests,
    size: Number(wire.size),
    pinned: wire.pinned,
  };
}

function toFilesystemUsage(wire: WireFilesystemUsage): FilesystemUsage {
  return {
    mountpoint: wire.fsId?.mountpoint ?? '',
    usedBytes: Number(wire.usedBytes?.value ?? 0),
    inodesUsed: Number(wire.inodesUsed?.value ?? 0),
  };
}
