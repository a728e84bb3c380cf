import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { formatReference, parseReference } from '../registry/reference.js';
import { CACHE_DROP_IN_NAME, parseCacheMirror, parseCacheMirrors, renderCacheDropIn, syncCacheDropIn } from './cache-mirror.js';
import { loadRegistriesConf, parseRegistriesConf, pullSources, type RegistriesConf } from './registries-conf.js';

const DIGEST = `sha256:${'b'.repeat(64)}`;
const conf = (text: string, file = 'registries.conf'): RegistriesConf => ({ registries: parseRegistriesConf(text, file), files: [file] });
/** What CRI-O sees: the main file's entries, then the drop-in's replacing those with the same prefix. */
const merged = (main: RegistriesConf, dropIn: string): RegistriesConf => {
  const byPrefix = new Map(main.registries.map((entry) => [entry.prefix, entry]));
  for (const entry of parseRegistriesConf(dropIn, CACHE_DROP_IN_NAME)) byPrefix.set(entry.prefix, entry);
  return { registries: [...byPrefix.values()], files: [...main.files, CACHE_DROP_IN_NAME] };
};
const order = (c: RegistriesConf, image: string) => pullSources(c, parseReference(image)).map((source) => `${formatReference(source.ref)}${source.insecure ? ' insecure' : ''}`);

describe('--cache-mirror values', () => {
  it('accepts SOURCE=HOST[:PORT][/PREFIX]', () => {
    expect(parseCacheMirror('quay.io=10.0.0.5:5000')).toEqual({ source: 'quay.io', location: '10.0.0.5:5000' });
    expect(parseCacheMirror('quay.io/openshift-release-dev=cache.prestage.svc:5000/quay/')).toEqual({ source: 'quay.io/openshift-release-dev', location: 'cache.prestage.svc:5000/quay' });
  });

  it('refuses anything else with a one-line error naming the value and the form', () => {
    for (const bad of ['quay.io', 'quay.io=', '=10.0.0.5:5000', 'quay.io=http://10.0.0.5:5000', 'quay.io=10.0.0.5:5000=x', 'quay.io=bad host:5000']) {
      expect(() => parseCacheMirror(bad)).toThrow(BadInputError);
      expect(() => parseCacheMirror(bad)).toThrow(new RegExp(`^--cache-mirror ${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: .*expected SOURCE=HOST\\[:PORT\\]\\[/PREFIX\\], e.g. quay.io=10.0.0.5:5000$`));
    }
    expect(() => parseCacheMirrors(['quay.io=a:1', 'quay.io=b:2'])).toThrow('--cache-mirror names quay.io twice');
  });
});

/** As the MCO renders an ImageDigestMirrorSet for quay.io/openshift-release-dev/ocp-v4.0-art-dev. */
const IDMS_ENTRY = conf(`
[[registry]]
prefix = ""
location = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"

[[registry.mirror]]
location = "mirror.corp:8443/ocp/release"
pull-from-mirror = "digest-only"
`);

describe('the cache drop-in', () => {
  it('with nothing configured: the cache (plain HTTP, digest pulls only), then the registry itself', () => {
    const base = conf('');
    const text = renderCacheDropIn([{ source: 'quay.io', location: '10.0.0.5:5000' }], base);
    expect(text).toContain('[[registry]]\nprefix = "quay.io"\nlocation = "quay.io"\n\n[[registry.mirror]]\nlocation = "10.0.0.5:5000"\ninsecure = true\npull-from-mirror = "digest-only"\n');
    const after = merged(base, text);
    expect(order(after, `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`)).toEqual([
      `10.0.0.5:5000/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST} insecure`,
      `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    ]);
    // A tag pull never uses a digest-only mirror.
    expect(after.registries[0]?.mirrors.map((mirror) => mirror.pullFromMirror)).toEqual(['digest-only']);
  });

  it("replaces the main file's entry for the same prefix: its mirrors, location and insecure carried over, after the cache", () => {
    const base = conf(`
[[registry]]
prefix = "quay.io"
location = "quay.io"

[[registry.mirror]]
location = "mirror.corp:8443/quay"

[[registry.mirror]]
location = "10.1.1.1:5000"
insecure = true
pull-from-mirror = "digest-only"

[[registry]]
location = "registry.redhat.io"
`);
    const after = merged(base, renderCacheDropIn([{ source: 'quay.io', location: '10.0.0.5:5000' }], base));
    expect(order(after, `quay.io/team/app@${DIGEST}`)).toEqual([
      `10.0.0.5:5000/team/app@${DIGEST} insecure`,
      `mirror.corp:8443/quay/team/app@${DIGEST}`,
      `10.1.1.1:5000/team/app@${DIGEST} insecure`,
      `quay.io/team/app@${DIGEST}`,
    ]);
    // Other registries untouched.
    expect(order(after, `registry.redhat.io/ubi9@${DIGEST}`)).toEqual([`registry.redhat.io/ubi9@${DIGEST}`]);
  });

  it("puts the cache in front of an ImageDigestMirrorSet's longer prefix too, which would otherwise win over the cache's entry", () => {
    const base = IDMS_ENTRY;
    const after = merged(base, renderCacheDropIn([{ source: 'quay.io', location: '10.0.0.5:5000' }], base));
    expect(order(after, `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`)).toEqual([
      `10.0.0.5:5000/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST} insecure`,
      `mirror.corp:8443/ocp/release@${DIGEST}`,
      `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    ]);
    expect(order(after, `quay.io/other/x@${DIGEST}`)).toEqual([`10.0.0.5:5000/other/x@${DIGEST} insecure`, `quay.io/other/x@${DIGEST}`]);
  });

  it('in a cache tree: the node\'s leaf first, then the root, then what the node had, for longer prefixes too', () => {
    const base = IDMS_ENTRY;
    const after = merged(base, renderCacheDropIn([{ source: 'quay.io', location: '10.0.0.5:5000', leaf: '10.0.0.7:5000' }], base));
    expect(order(after, `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`)).toEqual([
      `10.0.0.7:5000/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST} insecure`,
      `10.0.0.5:5000/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST} insecure`,
      `mirror.corp:8443/ocp/release@${DIGEST}`,
      `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    ]);
    expect(order(after, `quay.io/other/x@${DIGEST}`)).toEqual([`10.0.0.7:5000/other/x@${DIGEST} insecure`, `10.0.0.5:5000/other/x@${DIGEST} insecure`, `quay.io/other/x@${DIGEST}`]);
    // A root under a path: the leaf serves the root's paths.
    const pathed = merged(conf(''), renderCacheDropIn([{ source: 'quay.io', location: 'cache:5000/quay', leaf: 'leaf:5000' }], conf('')));
    expect(order(pathed, `quay.io/a/b@${DIGEST}`)).toEqual([`leaf:5000/quay/a/b@${DIGEST} insecure`, `cache:5000/quay/a/b@${DIGEST} insecure`, `quay.io/a/b@${DIGEST}`]);
  });

  it("moves a shorter prefix's mirrors down to a cached source below it", () => {
    const base = conf(`
[[registry]]
location = "quay.io"

[[registry.mirror]]
location = "mirror.corp/quay"
`);
    const after = merged(base, renderCacheDropIn([{ source: 'quay.io/openshift-release-dev', location: 'cache:5000/ocp' }], base));
    expect(order(after, `quay.io/openshift-release-dev/ocp-release@${DIGEST}`)).toEqual([
      `cache:5000/ocp/ocp-release@${DIGEST} insecure`,
      `mirror.corp/quay/openshift-release-dev/ocp-release@${DIGEST}`,
      `quay.io/openshift-release-dev/ocp-release@${DIGEST}`,
    ]);
    expect(order(after, `quay.io/other/x@${DIGEST}`)).toEqual([`mirror.corp/quay/other/x@${DIGEST}`, `quay.io/other/x@${DIGEST}`]);
  });

  it('routes a repository the cache served a corrupt blob of past it, and only that repository; an entry the cache took is given back as it was', () => {
    const base = IDMS_ENTRY;
    const mirrors = [{ source: 'quay.io', location: '10.0.0.5:5000' }];
    const release = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`;
    const app = `quay.io/team/app@${DIGEST}`;
    // The IDMS's repository: its entry (cache first) replaced by the node's own; not under a cached source: nothing.
    let text = renderCacheDropIn(mirrors, base, ['quay.io/openshift-release-dev/ocp-v4.0-art-dev', 'registry.example.com/app']);
    expect(text).not.toContain('registry.example.com');
    expect(text.match(/prefix = "quay.io\/openshift-release-dev\/ocp-v4.0-art-dev"/g)).toHaveLength(1);
    let after = merged(base, text);
    expect(order(after, release)).toEqual([`mirror.corp:8443/ocp/release@${DIGEST}`, release]);
    expect(order(after, app)).toEqual([`10.0.0.5:5000/team/app@${DIGEST} insecure`, app]);
    // A repository with no entry of its own: one, from quay.io's (no mirrors), the cache left out.
    text = renderCacheDropIn(mirrors, base, ['quay.io/team/app']);
    expect(text.endsWith('[[registry]]\nprefix = "quay.io/team/app"\nlocation = "quay.io/team/app"\n')).toBe(true);
    after = merged(base, text);
    expect(order(after, app)).toEqual([app]);
    expect(order(after, release)[0]).toBe(`10.0.0.5:5000/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST} insecure`);
  });

  it('is the same bytes for the same input, whatever the flag order', () => {
    const base = conf('');
    const a = renderCacheDropIn([{ source: 'quay.io', location: 'c:5000' }, { source: 'registry.redhat.io', location: 'd:5000' }], base);
    const b = renderCacheDropIn([{ source: 'registry.redhat.io', location: 'd:5000' }, { source: 'quay.io', location: 'c:5000' }], base);
    expect(a).toBe(b);
  });
});

describe('syncCacheDropIn', () => {
  let dir: string;
  let confDir: string;
  let reloads: number;
  const reload = async () => {
    reloads += 1;
  };
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'prestage-cache-mirror-'));
    confDir = join(dir, 'registries.conf.d');
    await mkdir(confDir);
    reloads = 0;
    await writeFile(join(dir, 'registries.conf'), '[[registry]]\nlocation = "quay.io"\n\n[[registry.mirror]]\nlocation = "127.0.0.1:5000"\ninsecure = true\n');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const sync = (mirrors: Array<{ source: string; location: string }>) => syncCacheDropIn({ registriesConf: join(dir, 'registries.conf'), registriesConfDir: confDir, mirrors, reload });

  it('writes once and reloads, leaves an equal file alone, removes it and reloads without mirrors; no temp file is left', async () => {
    const mirrors = [{ source: 'quay.io', location: '127.0.0.1:6000' }];
    expect((await sync(mirrors)).change).toBe('written');
    expect(reloads).toBe(1);
    const written = await readFile(join(confDir, CACHE_DROP_IN_NAME), 'utf8');
    expect(written).toContain('location = "127.0.0.1:6000"');
    // The main file's mirror is carried after the cache, read from the node without the drop-in itself.
    expect(written.indexOf('127.0.0.1:6000')).toBeLessThan(written.indexOf('127.0.0.1:5000'));
    expect((await sync(mirrors)).change).toBe('unchanged');
    expect(reloads).toBe(1);
    expect((await sync([])).change).toBe('removed');
    expect(reloads).toBe(2);
    expect(await readdir(confDir)).toEqual([]);
    expect((await readdir(dir)).sort()).toEqual(['registries.conf', 'registries.conf.d']);
    expect((await sync([])).change).toBe('unchanged');
    expect(reloads).toBe(2);
  });

  it('puts the previous file back when the reload fails', async () => {
    await sync([{ source: 'quay.io', location: '127.0.0.1:6000' }]);
    const before = await readFile(join(confDir, CACHE_DROP_IN_NAME), 'utf8');
    const failing = syncCacheDropIn({
      registriesConf: join(dir, 'registries.conf'),
      registriesConfDir: confDir,
      mirrors: [{ source: 'quay.io', location: '127.0.0.1:7000' }],
      reload: async () => {
        throw new Error('no crio');
      },
    });
    await expect(failing).rejects.toThrow(/CRI-O reload after writing .*99-prestage-cache.conf failed, previous file restored: no crio/);
    expect(await readFile(join(confDir, CACHE_DROP_IN_NAME), 'utf8')).toBe(before);
  });

  it('refuses a drop-in sorting after its own that sets a cached prefix', async () => {
    await writeFile(join(confDir, 'zz-late.conf'), '[[registry]]\nlocation = "quay.io"\n');
    await expect(sync([{ source: 'quay.io', location: '127.0.0.1:6000' }])).rejects.toThrow(/zz-late.conf sorts after 99-prestage-cache.conf and sets \[\[registry\]\] quay.io/);
    expect(reloads).toBe(0);
  });
});

describe('what the agent reads for image sizes', () => {
  it('leaves out the cache drop-in: size reads (4-byte Range) go where they went without the cache', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'prestage-cache-sizes-'));
    try {
      const confDir = join(dir, 'registries.conf.d');
      await writeFile(join(dir, 'registries.conf'), '[[registry]]\nlocation = "quay.io"\n\n[[registry.mirror]]\nlocation = "127.0.0.1:5000"\ninsecure = true\n');
      await syncCacheDropIn({ registriesConf: join(dir, 'registries.conf'), registriesConfDir: confDir, mirrors: [{ source: 'quay.io', location: '127.0.0.1:6000' }], reload: async () => undefined });
      // Another drop-in is still read.
      await writeFile(join(confDir, '10-other.conf'), '[[registry]]\nlocation = "registry.redhat.io"\nblocked = true\n');
      const read = await loadRegistriesConf(join(dir, 'registries.conf'), confDir);
      expect(read.files).toEqual([join(dir, 'registries.conf'), join(confDir, '10-other.conf')]);
      expect(order(read, `quay.io/a/b@${DIGEST}`)).toEqual([`127.0.0.1:5000/a/b@${DIGEST} insecure`, `quay.io/a/b@${DIGEST}`]);
      // Read with it (as CRI-O does), the cache comes first.
      const all = await loadRegistriesConf(join(dir, 'registries.conf'), confDir, []);
      expect(order(all, `quay.io/a/b@${DIGEST}`)[0]).toBe(`127.0.0.1:6000/a/b@${DIGEST} insecure`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
