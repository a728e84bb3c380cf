/**
 * `npm run bench:harness`: the speeds of the test instruments themselves, which the correctness
 * tests no longer bound (a busy machine reads them differently), each as a ratio to its baseline:
 * - the fault proxy's bandwidth cap: a read's throughput over the rate set (baseline: the rate;
 *   1.00 is exact, under it the proxy is slower than the link it plays);
 * - the era fixtures: a build once the component layers are known against a cold build
 *   (baseline: the cold build; the eras tests build every era at least twice).
 * BENCH_RUNS rounds (default 3), medians; the load average is printed beside the figures.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { buildReleaseFixture } from '../fixtures/release.js';
import { ERAS, buildEraFixture, clearEraLayerCache } from '../fixtures/eras.js';
import { startFaultProxy } from '../test/harness/index.js';
import { median } from './median.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const MiB = 1024 * 1024;

console.log(`bench:harness: ${RUNS} runs, medians; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);

// The fault proxy in front of a plain HTTP origin serving one blob path.
const body = randomBytes(4 * MiB);
const origin = createServer((request, response) => {
  const size = Number(/\/blobs\/sha256:([0-9]+)$/.exec(request.url ?? '')?.[1] ?? 0);
  response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
  response.end(body.subarray(0, size));
});
await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
const proxy = await startFaultProxy({ upstream: `http://127.0.0.1:${(origin.address() as AddressInfo).port}` });
try {
  for (const [rate, size] of [[2 * MiB, 1 * MiB], [2 * MiB, 4 * MiB], [8 * MiB, 4 * MiB]] as const) {
    proxy.setBandwidth(rate);
    const ratios: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const started = performance.now();
      const reply = await fetch(`${proxy.url}/v2/bench/blobs/sha256:${size}`);
      const read = (await reply.arrayBuffer()).byteLength;
      if (read !== size) throw new Error(`read ${read} B of ${size}`);
      ratios.push(size / ((performance.now() - started) / 1000) / rate);
    }
    console.log(`fault proxy, ${size / MiB} MiB at ${rate / MiB} MiB/s: throughput ${median(ratios).toFixed(3)} x the rate (runs ${ratios.map((r) => r.toFixed(3)).join(' ')})`);
  }
} finally {
  await proxy.stop();
  origin.close();
}

// Fixtures: cold (layers computed) against warm (layers known).
const coldRelease: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const started = performance.now();
  buildReleaseFixture();
  coldRelease.push(performance.now() - started);
}
console.log(`release fixture: ${median(coldRelease).toFixed(0)} ms a build`);
for (const era of ERAS) {
  const cold: number[] = [];
  const warm: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    clearEraLayerCache();
    let started = performance.now();
    buildEraFixture(era);
    cold.push(performance.now() - started);
    started = performance.now();
    buildEraFixture(era);
    warm.push(performance.now() - started);
  }
  console.log(`era ${era} fixture: cold ${median(cold).toFixed(0)} ms, warm ${median(warm).toFixed(0)} ms: warm ${(median(warm) / median(cold)).toFixed(3)} x cold`);
}
