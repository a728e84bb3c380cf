/**
 * vitest's order (failed first, then slowest first from its cache, else largest first), with one
 * change: the files that run kubelets (HOST_FILES, one at a time by test/cluster/host-lock.ts) are
 * spread evenly through the integration files instead of landing side by side, so that the other
 * worker runs something else meanwhile rather than waiting on the lock.
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export function spreadSequencer(hostFiles: readonly string[]): typeof BaseSequencer {
  return class SpreadHostFiles extends BaseSequencer {
    override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
      const sorted = await super.sort(files);
      const isHost = (spec: TestSpecification) => hostFiles.includes(relative(spec.project.config.root, spec.moduleId));
      const host = sorted.filter(isHost);
      if (host.length === 0) return sorted;
      const others = sorted.filter((spec) => !isHost(spec));
      // Within the integration files (after the unit ones): host file i goes at i/n of the way.
      const first = others.findIndex((spec) => spec.project.name === host[0]!.project.name);
      const start = first < 0 ? others.length : first;
      const span = others.length - start;
      const result = [...others];
      for (let i = host.length - 1; i >= 0; i--) result.splice(start + Math.floor((i * span) / host.length), 0, host[i]!);
      return result;
    }
  };
}
