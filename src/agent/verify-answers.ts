/**
 * Verify answers: the verify requests of the sets that select this node (their
 * `prestage.dev/verify-requested` annotation) answered from one CRI ListImages made after the
 * requests were seen, per set its missing and unpinned images, in the status's `verified`.
 * No pull, no pin: what the runtime holds now, not after a repair.
 */
import type { Logger } from 'pino';
import { MAX_VERIFIED_SETS, MAX_VERIFY_REQUEST_LENGTH, VERIFY_REQUESTED_ANNOTATION, type NodePinnedImagesStatus, type NodeVerification, type PinnedImageSet } from '../api/prestage.js';
import { verifySet } from '../verify/verdict.js';
import type { AgentCluster } from './agent-cluster.js';
import type { ImageRuntime } from './runtime.js';

export interface VerifyAnswersOptions {
  readonly cluster: Pick<AgentCluster, 'nodeLabels' | 'readStatus'>;
  readonly runtime: Pick<ImageRuntime, 'listImages'>;
  readonly log: Logger;
  /** The sets that select this node, in name order. */
  readonly selectingSets: () => PinnedImageSet[];
  /** Writes the status `status()` reads then, with this room's answer (the status writer's turn). */
  readonly write: (status: () => Promise<NodePinnedImagesStatus>) => Promise<void>;
}

export class VerifyAnswers {
  /** The last answer to verify requests, carried in every status written (the previous agent's after a restart). */
  private verified: NodeVerification | undefined;
  private verifying: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly options: VerifyAnswersOptions) {}

  /** The answer every status write carries. */
  get answer(): NodeVerification | undefined {
    return this.verified;
  }

  /** A restarted agent carries the answer the previous one left, unless it answered already. */
  adopt(left: NodeVerification | undefined): void {
    this.verified ??= left;
  }

  /** Calls during one coalesce into one more; none start once stopped. */
  verify(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.verifying) {
      this.again = true;
      return this.verifying;
    }
    this.verifying = (async () => {
      do {
        this.again = false;
        try {
          await this.answerRequests();
        } catch (error) {
          this.options.log.error({ err: (error as Error).message }, 'verify failed');
        }
      } while (this.again && !this.stopped);
      this.verifying = undefined;
    })();
    return this.verifying;
  }

  /** No new answers after this; the one under way ends. */
  stop(): void {
    this.stopped = true;
  }

  /** Resolves once no answer is under way. */
  async idle(): Promise<void> {
    await this.verifying;
  }

  private async answerRequests(): Promise<void> {
    const { cluster, runtime, log } = this.options;
    if (!cluster.nodeLabels()) return;
    // The sets first, then the runtime: the check is made after each request was seen.
    // The newest requests first (`verify` stamps an RFC 3339 time first), as many as the status holds.
    const requestOf = (set: PinnedImageSet) => (set.metadata.annotations?.[VERIFY_REQUESTED_ANNOTATION] ?? '').slice(0, MAX_VERIFY_REQUEST_LENGTH);
    const requested = this.options
      .selectingSets()
      .filter((set) => requestOf(set))
      .sort((a, b) => requestOf(b).localeCompare(requestOf(a)))
      .slice(0, MAX_VERIFIED_SETS);
    if (requested.length === 0) return;
    const stored = await runtime.listImages();
    this.verified = {
      time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      sets: requested.map((set) =>
        verifySet(
          { name: set.metadata.name, ...(set.metadata.uid ? { uid: set.metadata.uid } : {}), images: set.spec.pinnedImages.map((entry) => entry.name) },
          requestOf(set),
          stored,
        ),
      ),
    };
    const missing = this.verified.sets.reduce((total, set) => total + set.missingCount + set.unpinnedCount, 0);
    log.info({ sets: this.verified.sets.length, missingOrUnpinned: missing }, 'verify request answered');
    // The status as last written, with this answer.
    await this.options.write(async () => (await cluster.readStatus()) ?? {});
  }
}
