/**
 * The Go runtime's collector for the Go daemons the tests start most (registries, CRI-O): off,
 * below a 256 MiB heap. Their live heaps are a few tens of MiB, and with Go's default
 * (GOGC=100) they collect and hand pages back to the kernel many times a second under the
 * suite's load: distribution gives every blob read a 4 MiB buffer, and CRI-O re-executes itself
 * to unpack every layer. What they do does not change, only the CPU it costs (2 cores run the
 * suite); explicit settings in `env` win. Measured with `npm run bench:testbed`.
 */
export type GoCollector = 'quiet' | 'default';

/** `env` for a Go daemon: with the quiet collector's settings, or as it is (Go's default, for benchmarks). */
export function withGoCollector(env: NodeJS.ProcessEnv, collector: GoCollector = 'quiet'): NodeJS.ProcessEnv {
  return collector === 'quiet' ? { GOGC: 'off', GOMEMLIMIT: '256MiB', ...env } : env;
}
