/**
 * A minimal CRI client: the image half of the Kubernetes Container Runtime Interface plus
 * `RuntimeService/Version`, spoken over gRPC on the runtime's unix socket (CRI-O, containerd).
 * The node agent uses it to pull, inspect and count images; it never talks to a registry itself.
 */
import { connect as connectSocket } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ClusterError } from '../errors.js';

/**
 * The CRI proto as protobufjs JSON, inlined in the single executable (scripts/dist.ts), which has
 * no proto file to read and may run on a read-only root; the package's proto/ file otherwise.
 */
declare const __PRESTAGE_CRI_PROTO_JSON__: string | undefined;

function loadProto(options: protoLoader.Options): protoLoader.PackageDefinition {
  if (typeof __PRESTAGE_CRI_PROTO_JSON__ === 'string') return protoLoader.fromJSON(JSON.parse(__PRESTAGE_CRI_PROTO_JSON__) as Parameters<typeof protoLoader.fromJSON>[0], options);
  return protoLoader.loadSync(fileURLToPath(new URL('../../proto/cri.proto', import.meta.url)), options);
}

/** Ordinary calls answer in milliseconds; a runtime that takes this long is stuck. */
const DEFAULT_CALL_TIMEOUT_MS = 30_000;
/** A pull of a multi-GiB image over a slow link legitimately takes many minutes. */
const DEFAULT_PULL_TIMEOUT_MS = 30 * 60_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Options of the channel to the runtime's socket. */
export const CRI_CHANNEL_OPTIONS: Readonly<grpc.ChannelOptions> = {
  // Image lists on a node with hundreds of images can exceed the 4 MiB default.
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  // A private subchannel, so close() really closes the socket: the runtime's graceful stop
  // (systemctl restart crio) waits for every open connection to go away.
  'grpc.use_local_subchannel_pool': 1,
  // grpc-js backs off reconnects 1.6x per failure up to 120 s: after a long runtime outage
  // (CRI-O restarted, upgraded, crashed) the agent would sit idle for minutes once it is back.
  // A local socket is cheap to retry, so reconnect at least every 5 s.
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': 5_000,
};

/** A CRI call failed; `code` is the gRPC status (e.g. `grpc.status.NOT_FOUND`). */
export class CriError extends ClusterError {
  constructor(
    message: string,
    readonly code: grpc.status,
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

// Wire shapes as @grpc/proto-loader decodes them (camelCase, int64 as string, defaults filled).
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

type Callback<Res> = (error: grpc.ServiceError | null, response?: Res) => void;
type UnaryMethod = (request: object, options: grpc.CallOptions, callback: Callback<unknown>) => grpc.ClientUnaryCall;
interface ServiceClientConstructor {
  new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ClientOptions): grpc.Client;
}

let services: { runtime: ServiceClientConstructor; image: ServiceClientConstructor } | undefined;

function loadServices(): NonNullable<typeof services> {
  if (!services) {
    const definition = loadProto({
      keepCase: false,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: false,
    });
    const v1 = (grpc.loadPackageDefinition(definition) as unknown as {
      runtime: { v1: { RuntimeService: ServiceClientConstructor; ImageService: ServiceClientConstructor } };
    }).runtime.v1;
    services = { runtime: v1.RuntimeService, image: v1.ImageService };
  }
  return services;
}

export class CriClient {
  private constructor(
    readonly socketPath: string,
    private readonly runtime: grpc.Client,
    private readonly images: grpc.Client,
    private readonly callTimeoutMs: number,
  ) {}

  /** Connects to a runtime socket (`/var/run/crio/crio.sock`) and waits until the channel is ready. */
  static async connect(socketPath: string, options: ConnectOptions = {}): Promise<CriClient> {
    const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    const unreachable = (error: unknown) =>
      new CriError(`cannot reach the container runtime at ${socketPath}: ${(error as Error).message}`, grpc.status.UNAVAILABLE, { cause: error });
    // Probe with a plain socket first: a grpc-js channel closed while it is still failing to
    // connect keeps retrying in the background and later holds an idle connection open, which
    // blocks the runtime's graceful shutdown.
    await probeSocket(socketPath, connectTimeoutMs).catch((error: unknown) => {
      throw unreachable(error);
    });
    const { runtime: RuntimeService, image: ImageService } = loadServices();
    const address = `unix://${socketPath.startsWith('/') ? '' : '/'}${socketPath}`;
    const credentials = grpc.credentials.createInsecure();
    const channelOptions: grpc.ClientOptions = { ...CRI_CHANNEL_OPTIONS };
    const runtime = new RuntimeService(address, credentials, channelOptions);
    // Both services share one channel so a single socket connection serves every call.
    const images = new ImageService(address, credentials, { ...channelOptions, channelOverride: runtime.getChannel() });
    try {
      await new Promise<void>((resolve, reject) => runtime.waitForReady(Date.now() + connectTimeoutMs, (error) => (error ? reject(error) : resolve())));
    } catch (error) {
      runtime.close();
      throw unreachable(error);
    }
    return new CriClient(socketPath, runtime, images, options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS);
  }

  async version(): Promise<RuntimeVersion> {
    const response = await this.call<{ runtimeName: string; runtimeVersion: string; runtimeApiVersion: string }>(
      this.runtime,
      'version',
      { version: 'v1' },
    );
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
      this.images,
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
    const response = await this.call<{ image: WireImage | null }>(this.images, 'imageStatus', { image: { image }, verbose: false });
    return response.image ? toRuntimeImage(response.image) : null;
  }

  async listImages(): Promise<RuntimeImage[]> {
    const response = await this.call<{ images: WireImage[] }>(this.images, 'listImages', {});
    return response.images.map(toRuntimeImage);
  }

  async removeImage(image: string): Promise<void> {
    await this.call(this.images, 'removeImage', { image: { image } }, undefined, `remove ${image}`);
  }

  async imageFsInfo(): Promise<ImageFsInfo> {
    const response = await this.call<{
      imageFilesystems: WireFilesystemUsage[];
      containerFilesystems: WireFilesystemUsage[];
    }>(this.images, 'imageFsInfo', {});
    return {
      imageFilesystems: response.imageFilesystems.map(toFilesystemUsage),
      containerFilesystems: response.containerFilesystems.map(toFilesystemUsage),
    };
  }

  close(): void {
    this.images.close();
    this.runtime.close();
  }

  private call<Res>(client: grpc.Client, method: string, request: object, timeoutMs?: number, what?: string, signal?: AbortSignal): Promise<Res> {
    const rpc = (client as unknown as Record<string, UnaryMethod>)[method];
    if (!rpc) throw new Error(`CRI method ${method} is not in proto/cri.proto`);
    const deadline = Date.now() + (timeoutMs ?? this.callTimeoutMs);
    return new Promise<Res>((resolve, reject) => {
      const call = rpc.call(client, request, { deadline }, (error, response) => {
        signal?.removeEventListener('abort', cancel);
        if (error) {
          reject(new CriError(`CRI ${what ?? method} on ${this.socketPath} failed: ${error.details || error.message}`, error.code, { cause: error }));
        } else {
          resolve(response as Res);
        }
      });
      const cancel = () => call.cancel();
      if (signal?.aborted) cancel();
      else signal?.addEventListener('abort', cancel, { once: true });
    });
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
