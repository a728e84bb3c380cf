/** What the node agent reads from and writes to the Kubernetes API: the rooms of the loop share it. */
import type { NodePinnedImagesStatus, PinnedImageSet } from '../api/prestage.js';
import type { PullSecret } from '../registry/credentials.js';

/** What the agent reads from and writes to the Kubernetes API; informer-backed in production. */
export interface AgentCluster {
  /** Every PinnedImageSet as last seen. */
  pinnedImageSets(): readonly PinnedImageSet[];
  /** This node's labels; undefined until the Node has been seen. */
  nodeLabels(): Readonly<Record<string, string>> | undefined;
  /**
   * A Secret a set names in `spec.pullSecrets`, read afresh (it may rotate); rejects with a
   * one-line reason (not found, wrong type, not readable) that never holds a credential.
   */
  readPullSecret?(name: string): Promise<PullSecret>;
  readStatus(): Promise<NodePinnedImagesStatus | undefined>;
  writeStatus(status: NodePinnedImagesStatus): Promise<void>;
  /** A Warning Event on this Node, for `kubectl describe node`. */
  recordWarning?(reason: string, message: string): Promise<void>;
}
