import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigLock, findCrioPid, pinPatternMatches, renderPinDropIn } from './crio.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;

describe('renderPinDropIn', () => {
  it('sorts and deduplicates, so equal pin lists give equal bytes', () => {
    expect(renderPinDropIn([image(2), image(1), image(2)])).toBe(renderPinDropIn([image(1), image(2)]));
    expect(renderPinDropIn([image(1)])).toContain(`[crio.image]\npinned_images = [\n  "${image(1)}",\n]\n`);
  });
  it("carries other files' pins after its own, each once, grouped by file", () => {
    const carried = new Map([['/etc/crio/crio.conf.d/50-pinned-images', [image(3), image(1)]], ['/etc/crio/crio.conf', ['quay.io/ocp/*']]]);
    expect(renderPinDropIn([image(2), image(1)], carried)).toContain(
      `pinned_images = [\n  "${image(1)}",\n  "${image(2)}",\n  # from /etc/crio/crio.conf\n  "quay.io/ocp/*",\n  # from /etc/crio/crio.conf.d/50-pinned-images\n  "${image(3)}",\n]\n`,
    );
  });
});

describe('pinPatternMatches', () => {
  it("matches as CRI-O does: the whole name, a trailing * glob, a *keyword*", () => {
    expect(pinPatternMatches(image(1), image(1))).toBe(true);
    expect(pinPatternMatches(image(1), image(2))).toBe(false);
    expect(pinPatternMatches('quay.io/ns/*', image(1))).toBe(true);
    expect(pinPatternMatches('quay.io/ocp/*', image(1))).toBe(false);
    expect(pinPatternMatches('registry.example/*', 'registry.example/a@sha256:1')).toBe(true);
    expect(pinPatternMatches('*pause*', 'registry.k8s.io/pause:3.10')).toBe(true);
    expect(pinPatternMatches('*pause*', 'registry.k8s.io/etcd:3.5')).toBe(false);
  });
});

describe('findCrioPid', () => {
  const procs: string[] = [];
  afterAll(() => procs.forEach((proc) => rmSync(proc, { recursive: true, force: true })));
  /** A /proc of `crio` and other processes: comm and NUL-separated cmdline, as the kernel shows them. */
  function fakeProc(processes: Record<number, { comm: string; args: string[] }>): string {
    const proc = mkdtempSync(join(tmpdir(), 'prestage-proc-'));
    procs.push(proc);
    for (const [pid, { comm, args }] of Object.entries(processes)) {
      mkdirSync(join(proc, pid));
      writeFileSync(join(proc, pid, 'comm'), `${comm}\n`);
      writeFileSync(join(proc, pid, 'cmdline'), `${args.join('\0')}\0`);
    }
    mkdirSync(join(proc, 'self'));
    return proc;
  }

  it('picks the crio whose --config-dir is the drop-in directory, by its command line alone', async () => {
    const proc = fakeProc({
      10: { comm: 'crio', args: ['/usr/bin/crio', '--config-dir', '/srv/node-a/crio.conf.d'] },
      11: { comm: 'crio', args: ['/usr/bin/crio', '--config-dir=/srv/node-b/crio.conf.d/'] },
      12: { comm: 'conmon', args: ['/usr/bin/conmon', '--config-dir', '/srv/node-b/crio.conf.d'] },
    });
    expect(await findCrioPid('/srv/node-b/crio.conf.d', proc)).toBe(11);
    expect(await findCrioPid('/srv/node-a/crio.conf.d/', proc)).toBe(10);
  });

  it("takes CRI-O's default directory when the command line names none, and the only crio when none matches", async () => {
    const proc = fakeProc({ 20: { comm: 'crio', args: ['/usr/bin/crio'] }, 21: { comm: 'crio', args: ['crio', '-d', 'relative/conf.d'] } });
    expect(await findCrioPid('/etc/crio/crio.conf.d', proc)).toBe(20);
    // A relative directory is relative to CRI-O's cwd, which only ptrace shows: never a match.
    await expect(findCrioPid('/x/relative/conf.d', proc)).rejects.toThrow('crio pids 20, 21 name other --config-dir directories');
    const lone = fakeProc({ 30: { comm: 'crio', args: ['crio', '--config-dir', '/elsewhere'] } });
    expect(await findCrioPid('/etc/crio/crio.conf.d', lone)).toBe(30);
  });

  it('says that hostPID is missing when no crio is visible', async () => {
    const proc = fakeProc({ 1: { comm: 'prestage', args: ['node', 'prestage.js', 'agent'] } });
    await expect(findCrioPid('/etc/crio/crio.conf.d', proc)).rejects.toThrow(/^cannot find the CRI-O process that reads \/etc\/crio\/crio\.conf\.d in .* \(no crio process is visible: the agent pod needs hostPID: true\); or pass --reload=systemctl\|pidfile:<path>$/);
  });
});

describe('ConfigLock', () => {
  it('runs one piece of work at a time, in order, and goes on after a failure', async () => {
    const lock = new ConfigLock();
    const events: string[] = [];
    const step = (name: string, fail = false) => async () => {
      events.push(`${name} start`);
      await new Promise((resolve) => setImmediate(resolve));
      events.push(`${name} end`);
      if (fail) throw new Error(name);
    };
    const results = await Promise.allSettled([lock.run(step('write', true)), lock.run(step('reload')), lock.run(step('write again'))]);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect(events).toEqual(['write start', 'write end', 'reload start', 'reload end', 'write again start', 'write again end']);
  });
});
