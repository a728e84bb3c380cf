/**
 * The run's last line, `tests: N passed, N failed, N skipped`: the plain closing line that CI
 * readers of any language understand (vitest's own summary is not one of them).
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0, pending: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) counts[test.result().state]++;
    }
    // A file that failed to load has no tests to count; it still fails the run.
    const brokenFiles = testModules.filter((m) => m.state() === 'failed' && [...m.children.allTests()].length === 0).length;
    process.stdout.write(`tests: ${counts.passed} passed, ${counts.failed + brokenFiles} failed, ${counts.skipped + counts.pending} skipped\n`);
  }
}
