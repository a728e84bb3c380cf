import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatReference, parseReference } from '../registry/reference.js';
import { loadRegistriesConf, parseRegistriesConf, pullSources, type RegistriesConf } from './registries-conf.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;
const sources = (conf: RegistriesConf, image: string) =>
  pullSources(conf, parseReference(image)).map((source) => `${formatReference(source.ref)}${source.insecure ? ' insecure' : ''}${source.mirror ? ' mirror' : ''}`);
const conf = (text: string): RegistriesConf => ({ registries: parseRegistriesConf(text, 'registries.conf'), files: ['registries.conf'] });

describe('registries.conf v2', () => {
  const text = `
unqualified-search-registries = ["registry.access.redhat.com"]
short-name-mode = "enforcing"

[[registry]]
prefix = "quay.io/openshift-release-dev"
location = "quay.io/openshift-release-dev"

[[registry.mirror]]
location = "mirror.example.com:5000/ocp"

[[registry.mirror]]
location = "10.0.0.5:5000/ocp"
insecure = true

[[registry.mirror]]
location = "tags.example.com/ocp"
pull-from-mirror = "tag-only"

[[registry]]
location = "quay.io"
insecure = false

[[registry]]
prefix = "registry.example.com/team"
location = "registry.internal:8443/team-copy"
insecure = true

[[registry]]
prefix = "*.blocked.example"
blocked = true
`;

  it('tries the mirrors of the longest matching prefix in order, then the source, for a digest pull', () => {
    expect(sources(conf(text), `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`)).toEqual([
      `mirror.example.com:5000/ocp/ocp-v4.0-art-dev@${DIGEST} mirror`,
      `10.0.0.5:5000/ocp/ocp-v4.0-art-dev@${DIGEST} insecure mirror`,
      `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    ]);
    // Only the shorter prefix matches: no mirrors.
    expect(sources(conf(text), `quay.io/other/image@${DIGEST}`)).toEqual([`quay.io/other/image@${DIGEST}`]);
  });

  it('matches prefixes on whole path components and rewrites the prefix to the location', () => {
    expect(sources(conf(text), `quay.io/openshift-release-dev-fork/x@${DIGEST}`)).toEqual([`quay.io/openshift-release-dev-fork/x@${DIGEST}`]);
    expect(sources(conf(text), `registry.example.com/team/app@${DIGEST}`)).toEqual([`registry.internal:8443/team-copy/app@${DIGEST} insecure`]);
    expect(sources(conf(text), `docker.io/library/busybox@${DIGEST}`)).toEqual([`docker.io/library/busybox@${DIGEST}`]);
  });

  it('refuses a blocked registry, wildcard prefixes included', () => {
    expect(() => sources(conf(text), `a.blocked.example/x@${DIGEST}`)).toThrow('registry *.blocked.example is blocked in registries.conf');
  });

  it('uses the mirrors of mirror-by-digest-only registries for digest pulls', () => {
    const digestOnly = conf(`[[registry]]\nlocation = "quay.io"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = "m.example"\n`);
    expect(sources(digestOnly, `quay.io/ns/x@${DIGEST}`)).toEqual([`m.example/ns/x@${DIGEST} mirror`, `quay.io/ns/x@${DIGEST}`]);
  });

  it('reads version 1 insecure and blocked lists', () => {
    const v1 = conf(`[registries.search]\nregistries = ["quay.io"]\n[registries.insecure]\nregistries = ["10.0.0.5:5000"]\n[registries.block]\nregistries = ["evil.example"]\n`);
    expect(sources(v1, `10.0.0.5:5000/ns/x@${DIGEST}`)).toEqual([`10.0.0.5:5000/ns/x@${DIGEST} insecure`]);
    expect(() => sources(v1, `evil.example/ns/x@${DIGEST}`)).toThrow(/blocked/);
  });

  it('rejects invalid files with one line naming the file', () => {
    const bad = (body: string) => {
      try {
        parseRegistriesConf(body, '/etc/containers/registries.conf');
      } catch (error) {
        return (error as Error).message;
      }
      return 'no error';
    };
    expect(bad('[[registry]\nlocation = "x"')).toMatch(/^\/etc\/containers\/registries\.conf line 1: Invalid TOML document: [^\n]+$/);
    expect(bad('[[registry]]\nlocation = "https://quay.io"')).toBe('/etc/containers/registries.conf: location "https://quay.io" must not have a URI scheme');
    expect(bad('[[registry]]\nlocation = "quay.io"\n[[registry.mirror]]\ninsecure = true')).toBe('/etc/containers/registries.conf: [[registry]] quay.io: a mirror has no location');
    expect(bad('[[registry]]\nlocation = "quay.io"\ninsecure = "yes"')).toBe('/etc/containers/registries.conf: "insecure" must be true or false');
    expect(bad('[[registry]]\nlocation = "quay.io"\n[[registry.mirror]]\nlocation = "m"\npull-from-mirror = "sometimes"')).toBe('/etc/containers/registries.conf: [[registry]] quay.io: pull-from-mirror must be all, digest-only or tag-only, not "sometimes"');
  });
});

describe('loadRegistriesConf', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'prestage-registries-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('means no mirrors when neither the file nor the directory exists', async () => {
    const loaded = await loadRegistriesConf(join(dir, 'registries.conf'), join(dir, 'registries.conf.d'));
    expect(loaded).toEqual({ registries: [], files: [] });
    expect(sources(loaded, `quay.io/ns/x@${DIGEST}`)).toEqual([`quay.io/ns/x@${DIGEST}`]);
  });

  it('reads *.conf drop-ins in name order after the main file; a later entry with the same prefix replaces an earlier one', async () => {
    const confDir = join(dir, 'registries.conf.d');
    await mkdir(confDir);
    await mkdir(join(confDir, 'sub.conf'));
    await writeFile(join(dir, 'registries.conf'), '[[registry]]\nlocation = "quay.io"\n[[registry.mirror]]\nlocation = "old-mirror.example"\n');
    await writeFile(join(confDir, '20-later.conf'), '[[registry]]\nlocation = "quay.io"\n[[registry.mirror]]\nlocation = "new-mirror.example"\ninsecure = true\n');
    await writeFile(join(confDir, '10-first.conf'), '[[registry]]\nlocation = "quay.io"\n[[registry.mirror]]\nlocation = "middle-mirror.example"\n');
    await writeFile(join(confDir, '30-ignored.conf.bak'), 'not toml at all [');
    await writeFile(join(confDir, '15-other.conf'), '[[registry]]\nlocation = "registry.redhat.io"\n[[registry.mirror]]\nlocation = "rh-mirror.example"\n');
    const loaded = await loadRegistriesConf(join(dir, 'registries.conf'), confDir);
    expect(loaded.files).toEqual([join(dir, 'registries.conf'), join(confDir, '10-first.conf'), join(confDir, '15-other.conf'), join(confDir, '20-later.conf')]);
    expect(sources(loaded, `quay.io/ns/x@${DIGEST}`)).toEqual([`new-mirror.example/ns/x@${DIGEST} insecure mirror`, `quay.io/ns/x@${DIGEST}`]);
    expect(sources(loaded, `registry.redhat.io/ns/x@${DIGEST}`)).toEqual([`rh-mirror.example/ns/x@${DIGEST} mirror`, `registry.redhat.io/ns/x@${DIGEST}`]);
  });

  it('fails on a drop-in that does not parse, naming it', async () => {
    const confDir = join(dir, 'registries.conf.d');
    await mkdir(confDir);
    await writeFile(join(confDir, '01-broken.conf'), '[[registry]]\nlocation = \n');
    await expect(loadRegistriesConf(join(dir, 'registries.conf'), confDir)).rejects.toThrow(`${join(confDir, '01-broken.conf')} line 2: Invalid TOML document`);
  });
});
