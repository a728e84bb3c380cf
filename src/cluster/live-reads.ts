/**
 * The reads live planning makes (live-cluster.ts, live-operators.ts), read-only: collections page
 * by page as client-go's pager reads them, bounded where the cluster decides how many there are;
 * a 401/403 names the RBAC the plan needs and the way around it.
 */
import { ClusterError } from '../errors.js';
import { KubeApiError, type KubeClient, type KubeList, type KubeObject } from '../kube/client.js';
import { LIVE_CLUSTER_RBAC } from './live-cluster-help.js';

/** Items per list request: a big cluster has tens of thousands of Pods. */
const PAGE = 500;
/** Fresh lists after a `continue` token expired mid-list (410 Gone), before giving up. */
const EXPIRED_RESTARTS = 3;

/** The API server refused a read live planning needs. */
export class LiveClusterRefused extends ClusterError {
  constructor(
    readonly server: string,
    readonly what: string,
    readonly status: number,
    /** The RBAC that read needs, in words. */
    readonly needs: string = LIVE_CLUSTER_RBAC,
  ) {
    super(`${server} refused to ${what} (HTTP ${status}): planning from the live cluster needs ${needs}; or plan with --no-cluster`);
  }
}

export interface ListOptions {
  /** Items per page (big objects: fewer). */
  readonly page?: number;
  /** At most this many items are kept; one more is exit 4 naming `what`. */
  readonly max?: { readonly count: number; readonly what: string };
  readonly labelSelector?: string;
}

/**
 * Every item of a collection, page by page, each page reduced by `keep` before the next is read.
 * A token that expired while a big cluster was read (etcd compacted its revision: 410 Gone) starts
 * the list over, as client-go's pager does: pages of two revisions are never mixed.
 */
export async function listAll<T extends KubeObject, R>(client: KubeClient, path: string, keep: (item: T) => R[], options: ListOptions = {}): Promise<R[]> {
  for (let restarts = 0; ; restarts++) {
    const kept: R[] = [];
    let next: string | undefined;
    let seen = 0;
    try {
      do {
        const page = await client.get<KubeList<T>>(path, { limit: options.page ?? PAGE, continue: next, labelSelector: options.labelSelector });
        if (!Array.isArray(page.items)) throw new ClusterError(`${client.server} answered the list ${path} without items: not a Kubernetes API server`);
        seen += page.items.length;
        if (options.max && seen > options.max.count) throw new ClusterError(`${client.server} has more than ${options.max.count} ${options.max.what}, more than a plan reads; plan with --no-cluster`);
        for (const item of page.items) kept.push(...keep(item));
        next = page.metadata?.continue || undefined;
      } while (next);
      return kept;
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 410 && next !== undefined && restarts < EXPIRED_RESTARTS)) throw error;
    }
  }
}

/** A refusal names the RBAC live planning needs and the way around it. */
export async function read<T>(client: KubeClient, call: () => Promise<T>, what: string, needs?: string): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof KubeApiError && (error.status === 401 || error.status === 403)) throw new LiveClusterRefused(client.server, what, error.status, needs);
    throw error;
  }
}
