/**
 * The parts of registry, image and release documents the fixture tests read, as the fixture
 * writer (fixtures/) produces them: a test that reads a field it does not declare fails to compile.
 */
export interface Descriptor {
  readonly mediaType?: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: { readonly architecture: string; readonly os: string };
}

/** An image manifest (config and layers) or an index (manifests). */
export interface ManifestDocument {
  readonly mediaType?: string;
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
  readonly manifests: readonly Descriptor[];
}

export interface ImageConfigDocument {
  readonly architecture: string;
  readonly rootfs: { readonly diff_ids: readonly string[] };
  readonly config: { readonly Labels: Readonly<Record<string, string>> };
}

export interface ImageStreamDocument {
  readonly kind: string;
  readonly apiVersion: string;
  readonly metadata: { readonly name: string };
  readonly spec: { readonly tags: ReadonlyArray<{ readonly name: string; readonly from: { readonly kind: string; readonly name: string }; readonly annotations?: Readonly<Record<string, string>> }> };
}

interface ContainerDocument {
  readonly image: string;
  readonly env?: ReadonlyArray<{ readonly name: string; readonly value?: unknown }>;
  readonly args?: readonly string[];
}

/** A Kubernetes object of a release's manifests (any kind; a workload's pod template where there is one). */
export interface KubeDocument<Kind extends string = string> {
  readonly kind: Kind;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly annotations?: Readonly<Record<string, string>> };
  readonly spec?: { readonly template?: { readonly spec?: { readonly nodeSelector?: Readonly<Record<string, string>>; readonly containers?: readonly ContainerDocument[]; readonly initContainers?: readonly ContainerDocument[] } } };
  readonly data?: Readonly<Record<string, string>>;
}
