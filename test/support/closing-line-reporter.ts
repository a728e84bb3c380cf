/**
 * The run's last lines: the ten slowest files (where the suite's time goes, so that a file growing
 * slow is seen the day it does), then `tests: N passed, N failed, N skipped`, the plain closing
 * line that CI readers of any language understand (vitest's own summary is not one of them).
 * PRESTAGE_TEST_DURATIONS=FILE also writes every file's duration there as JSON.
 */
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

export interface FileDuration {
  file: string;
  /** Import, collection and every test and hook of the file, in ms. */
  ms: number;
}

export function fileDurations(testModules: ReadonlyArray<TestModule>, root = process.cwd()): FileDuration[] {
  return testModules
    .map((m) => {
      const d = m.diagnostic();
      return { file: relative(root, m.moduleId), ms: Math.round(d.collectDuration + d.setupDuration + d.duration) };
    })
    .sort((a, b) => b.ms - a.ms);
}

export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const durations = fileDurations(testModules);
    const out = process.env.PRESTAGE_TEST_DURATIONS;
    if (out) writeFileSync(out, JSON.stringify(durations, null, 1) + '\n');
    if (durations.length > 1) {
      const slowest = durations.slice(0, 10);
      process.stdout.write(`slowest files:\n${slowest.map((d) => `  ${(d.ms / 1000).toFixed(1).padStart(7)} s  ${d.file}`).join('\n')}\n`);
    }
    const counts = { passed: 0, failed: 0, skipped: 0, pending: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) counts[test.result().state]++;
    }
    // A file that failed to load has no tests to count; it still fails the run.
    const brokenFiles = testModules.filter((m) => m.state() === 'failed' && [...m.children.allTests()].length === 0).length;
    process.stdout.write(`tests: ${counts.passed} passed, ${counts.failed + brokenFiles} failed, ${counts.skipped + counts.pending} skipped\n`);
  }
}
