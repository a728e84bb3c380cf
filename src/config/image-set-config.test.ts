import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { parseImageSetConfiguration, readImageSetConfiguration } from './image-set-config.js';

const HEAD = 'apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\n';

/** oc-mirror's own example shapes: a platform channel, a filtered catalog, additional and blocked images, helm. */
const FULL = `${HEAD}archiveSize: 4
mirror:
  platform:
    architectures: [amd64, arm64]
    graph: true
    channels:
      - name: stable-4.16
        minVersion: 4.16.3
        maxVersion: 4.16.9
        shortestPath: true
      - name: 4-stable
        type: okd
  operators:
    - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16
      targetCatalog: my-namespace/redhat-operator-index
      targetTag: v4.16-filtered
      skipDependencies: true
      packages:
        - name: elasticsearch-operator
          defaultChannel: stable-5.8
          channels:
            - name: stable-5.8
              minVersion: 5.8.1
        - name: aws-load-balancer-operator
          minVersion: '1.1'
          maxVersion: 1.2.0
    - catalog: quay.io/operatorhubio/catalog:latest
      full: true
  additionalImages:
    - name: registry.redhat.io/ubi9/ubi:latest
    - name: quay.io/example/tool@sha256:${'a'.repeat(64)}
      targetRepo: mirror/tool
  helm:
    repositories:
      - name: podinfo
        url: https://stefanprodan.github.io/podinfo
        charts:
          - name: podinfo
            version: 5.0.0
  blockedImages:
    - name: ".*/alpine.*"
`;

const parse = (text: string) => parseImageSetConfiguration(text, 'isc.yaml');
const withOperators = (yaml: string) => parse(`${HEAD}mirror:\n  operators:\n${yaml}`);

describe('parseImageSetConfiguration', () => {
  it('reads platform, operators, additional and blocked images into the selection model', () => {
    const isc = parse(FULL);
    expect(isc.platform).toEqual({
      graph: true,
      architectures: ['amd64', 'arm64'],
      channels: [
        { name: 'stable-4.16', type: 'ocp', minVersion: '4.16.3', maxVersion: '4.16.9', shortestPath: true, full: false },
        { name: '4-stable', type: 'okd', shortestPath: false, full: false },
      ],
    });
    expect(isc.operators).toEqual([
      {
        catalog: 'registry.redhat.io/redhat/redhat-operator-index:v4.16', targetCatalog: 'my-namespace/redhat-operator-index', targetTag: 'v4.16-filtered', full: false,
        packages: [
          { name: 'elasticsearch-operator', defaultChannel: 'stable-5.8', channels: [{ name: 'stable-5.8', minVersion: '5.8.1' }] },
          { name: 'aws-load-balancer-operator', minVersion: '1.1', maxVersion: '1.2.0', channels: [] },
        ],
      },
      { catalog: 'quay.io/operatorhubio/catalog:latest', full: true, packages: [] },
    ]);
    expect(isc.additionalImages).toEqual(['registry.redhat.io/ubi9/ubi:latest', `quay.io/example/tool@sha256:${'a'.repeat(64)}`]);
    expect(isc.blockedImages).toEqual(['.*/alpine.*']);
  });

  it('lists the set fields prestage does not act on, for the CLI to warn about', () => {
    expect(parse(FULL).ignored).toEqual(['archiveSize', 'mirror.helm', 'mirror.operators[0].skipDependencies', 'mirror.additionalImages[1].targetRepo']);
  });

  it('an empty mirror stanza is a configuration of nothing, on amd64 when a platform names no architecture', () => {
    expect(parse(`${HEAD}mirror: {}`)).toEqual({ operators: [], additionalImages: [], blockedImages: [], ignored: [] });
    expect(parse(`${HEAD}mirror:\n  platform:\n    channels: [{name: stable-4.16}]`).platform?.architectures).toEqual(['amd64']);
  });

  it('platform.platforms (linux only) stand for architectures, and not together with them', () => {
    const isc = parse(`${HEAD}mirror:\n  platform:\n    platforms: [{os: linux, architecture: arm64}]`);
    expect(isc.platform?.architectures).toEqual(['arm64']);
    expect(() => parse(`${HEAD}mirror:\n  platform:\n    architectures: [amd64]\n    platforms: [{os: linux, architecture: arm64}]`)).toThrow(/mirror\.platform: platforms and architectures cannot be used together/);
  });

  it('unknown field mirror.operators[0].packages[0].chanels is refused, with the fields there are', () => {
    expect(() => withOperators('    - catalog: c:1\n      packages:\n        - name: etcd\n          chanels: [{name: stable}]')).toThrow(
      'isc.yaml: mirror.operators[0].packages[0].chanels: unknown field: oc-mirror\'s ImageSetConfiguration has no such field and refuses it; remove it or use one of: name, channels, defaultChannel, minVersion, maxVersion',
    );
  });

  it.each([
    ['top level', `${HEAD}metadata: {name: x}\nmirror: {}`, /isc\.yaml: metadata: unknown field/],
    ['mirror', `${HEAD}mirror:\n  operator: []`, /mirror\.operator: unknown field.* use one of: platform, operators, additionalImages, helm, blockedImages, samples$/],
    ['platform channel', `${HEAD}mirror:\n  platform:\n    channels: [{name: a, minversion: 4.16.0, shortest: true}]`, /mirror\.platform\.channels\[0\]\.shortest: unknown field/],
    ['additional image', `${HEAD}mirror:\n  additionalImages: [{name: a, tag: b}]`, /mirror\.additionalImages\[0\]\.tag: unknown field/],
    ['helm chart', `${HEAD}mirror:\n  helm:\n    local: [{name: a, path: /c, values: {}}]`, /mirror\.helm\.local\[0\]\.values: unknown field/],
  ])('refuses an unknown field at the %s', (_, text, message) => {
    expect(() => parse(text)).toThrow(BadInputError);
    expect(() => parse(text)).toThrow(message);
  });

  it('matches field names case-insensitively, as Go encoding/json does', () => {
    expect(withOperators('    - Catalog: c:1\n      packages: [{name: etcd, MinVersion: 0.9.0}]').operators[0]?.packages[0]?.minVersion).toBe('0.9.0');
  });

  it('refuses the removed bundles field, saying it was removed', () => {
    expect(() => withOperators('    - catalog: c:1\n      packages:\n        - name: etcd\n          bundles: [{name: etcd.v0.9.4}]')).toThrow(
      /mirror\.operators\[0\]\.packages\[0\]\.bundles: selecting bundles by name was removed from oc-mirror v2 \(oc-mirror#1045\)/,
    );
  });

  it.each([
    ['a number where a string goes', '    - catalog: c:1\n      packages: [{name: etcd, minVersion: 4.16}]', /packages\[0\]\.minVersion: must be a string, not number 4\.16 \(quote it: "4\.16"\)/],
    ['a string where a bool goes', '    - catalog: c:1\n      full: yes', /mirror\.operators\[0\]\.full: must be true or false, not string "yes"/],
    ['a mapping where a list goes', '    - catalog: c:1\n      packages: {name: etcd}', /mirror\.operators\[0\]\.packages: must be a list, not a mapping/],
    ['a version that is not semver', '    - catalog: c:1\n      packages: [{name: etcd, maxVersion: 0.9.x}]', /maxVersion: "0\.9\.x" must respect semantic versioning notation/],
    ['a missing catalog', '    - packages: [{name: etcd}]', /mirror\.operators\[0\]\.catalog: is required/],
    ['a package without a name', '    - catalog: c:1\n      packages: [{defaultChannel: stable}]', /packages\[0\]\.name: is required/],
  ])('refuses %s', (_, yaml, message) => {
    expect(() => withOperators(yaml)).toThrow(message);
  });

  it('a package range and a channel range together are refused', () => {
    expect(() => withOperators('    - catalog: c:1\n      packages:\n        - name: etcd\n          minVersion: 0.9.0\n          channels: [{name: stable, maxVersion: 0.9.4}]')).toThrow(
      /mirror\.operators\[0\]\.packages\[0\]\.channels\[0\]: operator etcd: mixing both filtering by minVersion\/maxVersion and filtering by channel minVersion\/maxVersion is not allowed/,
    );
  });

  it('full and a range together are refused', () => {
    expect(() => withOperators('    - catalog: c:1\n      full: true\n      packages: [{name: etcd, minVersion: 0.9.0}]')).toThrow(/packages\[0\]: full: true cannot be mixed with minVersion\/maxVersion/);
  });

  it('refuses duplicates as oc-mirror validate does: catalogs, packages, channels, release channels', () => {
    expect(() => withOperators('    - catalog: c:1\n    - catalog: c:1')).toThrow(/mirror\.operators\[1\]: catalog c:1: duplicate found in configuration/);
    expect(withOperators('    - catalog: c:1\n    - catalog: c:1\n      targetTag: other').operators).toHaveLength(2);
    expect(() => withOperators('    - catalog: c:1\n      packages: [{name: etcd}, {name: etcd}]')).toThrow(/duplicate package entry etcd/);
    expect(() => withOperators('    - catalog: c:1\n      packages: [{name: etcd, channels: [{name: a}, {name: a}]}]')).toThrow(/duplicate channel entry a/);
    expect(() => parse(`${HEAD}mirror:\n  platform:\n    channels: [{name: stable-4.16}, {name: stable-4.16}]`)).toThrow(/release channel stable-4\.16: duplicate/);
  });

  it('refuses a bad targetCatalog, platform type and blocked-image expression', () => {
    expect(() => withOperators('    - catalog: c:1\n      targetCatalog: ns/index:v1')).toThrow(/targetCatalog: "ns\/index:v1" is not a repository path/);
    expect(() => parse(`${HEAD}mirror:\n  platform:\n    channels: [{name: a, type: OCP}]`)).toThrow(/channels\[0\]\.type: "OCP" is not a platform type/);
    expect(() => parse(`${HEAD}mirror:\n  blockedImages: [{name: "(unclosed"}]`)).toThrow(/mirror\.blockedImages\[0\]\.name: "\(unclosed" is not a regular expression/);
  });

  it('checks apiVersion, kind and the mirror stanza', () => {
    expect(() => parse('apiVersion: mirror.openshift.io/v2alpha1\nmirror: {}')).toThrow(/isc\.yaml: kind: configuration missing kind/);
    expect(() => parse('apiVersion: mirror.openshift.io/v2alpha1\nkind: DeleteImageSetConfiguration\ndelete: {}')).toThrow(/cannot parse "DeleteImageSetConfiguration" as ImageSetConfiguration/);
    expect(() => parse('apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nmirror: {}')).toThrow(/v1alpha2 is oc-mirror v1's format/);
    expect(() => parse(HEAD)).toThrow(/mirror: configuration missing the mirror stanza/);
    expect(() => parse(`${HEAD}mirror: {}\ndelete: {}`)).toThrow(/delete: is not allowed in ImageSetConfiguration/);
  });

  it('refuses what is not YAML in one line with its position, and an empty file', () => {
    expect(() => parse(`${HEAD}mirror: {}\nmirror: {}`)).toThrow(/^isc\.yaml:4:1: not valid YAML: duplicated mapping key$/);
    expect(() => parse('')).toThrow(/isc\.yaml: is empty/);
  });

  it('refuses a file over 1 MiB, an alias bomb and deep nesting', () => {
    expect(() => parse(`${HEAD}mirror: {}\n#${'x'.repeat(1024 * 1024)}`)).toThrow(/over 1048576 bytes/);
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 6 }, (_, i) => `${'bcdefg'[i]}: &${'bcdefg'[i]} [${Array(10).fill(`*${'abcdef'[i]}`).join(', ')}]`)].join('\n');
    expect(() => parse(`${HEAD}mirror: {}\n${bomb}`)).toThrow(/expands to over 100000 values/);
    expect(() => parse(`${HEAD}mirror: ${'['.repeat(70)}${']'.repeat(70)}`)).toThrow(/nests deeper than 64 levels/);
  });
});

describe('readImageSetConfiguration', () => {
  it('reads the file, and names --config FILE when it is missing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'isc-'));
    try {
      await writeFile(join(dir, 'isc.yaml'), FULL);
      expect(readImageSetConfiguration(join(dir, 'isc.yaml')).operators).toHaveLength(2);
      expect(() => readImageSetConfiguration(join(dir, 'nope.yaml'))).toThrow(`--config ${join(dir, 'nope.yaml')}: no such file`);
      expect(() => readImageSetConfiguration(dir)).toThrow(/--config .*: cannot read it/);
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});
