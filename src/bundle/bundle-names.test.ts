import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { checkArchiveNames, checkMetadataNames, indexReference, isPlainFileName } from './bundle-names.js';
import { checkBound, READ_BOUNDS } from './bundle-reads.js';

const HEX = 'a'.repeat(64);
const parts = (layout: string, names: string[]) => ({
  layout,
  bytes: names.length * 10,
  parts: names.map((name) => ({ name, size: 10, sha256: `sha256:${HEX}` })),
});
const metadata = (release: object, extra: object = {}) => ({ release: { pullSpec: `quay.io/ocp/release@sha256:${HEX}`, version: '4.16.3', ...release }, ...extra });

describe('isPlainFileName', () => {
  it('accepts names that stay in their directory', () => {
    for (const name of ['ocp-4.16.3', '.hidden', 'a..b', 'x'.repeat(255)]) expect(isPlainFileName(name), name).toBe(true);
  });
  it('refuses traversal, separators, absolute paths, NUL and non-strings', () => {
    for (const name of ['', '.', '..', '../victim', '/tmp/victim', 'a/b', 'a\\b', 'a\0b', 'a\nb', 'x'.repeat(256), 7, undefined]) expect(isPlainFileName(name), String(name)).toBe(false);
  });
});

describe('checkArchiveNames', () => {
  it('accepts what writeArchive writes', () => {
    expect(() => checkArchiveNames(parts('ocp', ['ocp.tar.000', 'ocp.tar.001']), 'p/parts.json')).not.toThrow();
  });
  it('refuses a layout that is a path, naming the file', () => {
    for (const layout of ['../../../victim', '/victim', '..', 'a/b']) {
      expect(() => checkArchiveNames(parts(layout, [`${layout}.tar.000`]), 'p/parts.json')).toThrow(new BadInputError(`p/parts.json: layout ${JSON.stringify(layout)} is not a plain directory name; the parts file was altered: copy it again from where the bundle was created`));
    }
  });
  it('refuses parts named anything but <layout>.tar.NNN in order', () => {
    for (const name of ['..', '../x', '/etc/passwd', 'ocp.tar.001', 'other.tar.000']) {
      expect(() => checkArchiveNames(parts('ocp', [name]), 'parts.json'), name).toThrow(`parts.json: part 0 is named ${JSON.stringify(name)}, not "ocp.tar.000"`);
    }
  });
  it('refuses bad sizes, digests and a total that is not their sum; a newline stays quoted', () => {
    const doc = parts('ocp', ['ocp.tar.000']);
    expect(() => checkArchiveNames({ ...doc, parts: [{ ...doc.parts[0]!, size: -1 }] }, 'parts.json')).toThrow(/part ocp\.tar\.000 has size -1/);
    expect(() => checkArchiveNames({ ...doc, parts: [{ ...doc.parts[0]!, sha256: 'md5:x' }] }, 'parts.json')).toThrow(/has sha256 "md5:x"/);
    expect(() => checkArchiveNames({ ...doc, bytes: 11 }, 'parts.json')).toThrow(/bytes 11 is not the sum of its parts' sizes \(10\)/);
    expect(() => checkArchiveNames(parts('a\nb', ['x']), 'parts.json')).toThrow(/^parts\.json: layout "a\\nb" is not/);
    expect(() => checkArchiveNames({ layout: 'ocp', parts: [] }, 'parts.json')).toThrow(/lists no parts/);
  });
});

describe('indexReference', () => {
  it('accepts digest references and attachment tags', () => {
    expect(indexReference(`quay.io/a/b@sha256:${HEX}`, 'b').repository).toBe('a/b');
    expect(indexReference(`quay.io/a/b:sha256-${HEX}.sig`, 'b').tag).toBe(`sha256-${HEX}.sig`);
  });
  it('refuses traversal, names without digest or tag, and non-strings', () => {
    for (const name of [`quay.io/a/../../tenant-b/x@sha256:${HEX}`, `quay.io/a/./b@sha256:${HEX}`, 'quay.io/a/b', `quay.io/a/b@sha256:${HEX}\nx`, 3]) {
      expect(() => indexReference(name, 'bundle'), String(name)).toThrow(`bundle: index.json names image ${JSON.stringify(name)}, `);
    }
  });
});

describe('checkMetadataNames', () => {
  it('accepts what bundle create writes', () => {
    expect(() => checkMetadataNames(metadata({ tags: ['4.16.3-x86_64'] }, { previous: { source: 'x', blobs: [{ digest: `sha256:${HEX}`, size: 3 }] }, signatures: { release: { digest: `sha256:${HEX}`, signatures: [{ digest: `sha256:${HEX}`, size: 1 }], keys: { digest: `sha256:${HEX}`, size: 2 } }, sigstore: {} } }), 'b')).not.toThrow();
  });
  it('refuses a release tag that is a path', () => {
    expect(() => checkMetadataNames(metadata({ tags: ['../../../../tenant-b/ocp-release:x'] }), 'b')).toThrow(/^b: prestage-bundle\.json names release tag "\.\.\/\.\.\/\.\.\/\.\.\/tenant-b\/ocp-release:x", which is not a tag/);
    expect(() => checkMetadataNames(metadata({ tags: 'latest' }), 'b')).toThrow(/release tags that are not a list/);
  });
  it('refuses a release pullspec, previous blob or signature digest that is not one', () => {
    expect(() => checkMetadataNames(metadata({ pullSpec: 'quay.io/../x@sha256:1' }), 'b')).toThrow(/names release "quay\.io\/\.\.\/x@sha256:1", which is not a valid image reference/);
    expect(() => checkMetadataNames(metadata({}, { previous: { source: 'ocp-4.16.2', blobs: [{ digest: '../../etc/passwd', size: 1 }] } }), 'b')).toThrow(/names previous blobs digest "\.\.\/\.\.\/etc\/passwd"/);
    expect(() => checkMetadataNames(metadata({}, { previous: { source: 'a\nprestage: error: forged', blobs: [] } }), 'b')).toThrow(/names previous bundle "a\\nprestage: error: forged"/);
    expect(() => checkMetadataNames(metadata({}, { signatures: { release: { digest: `sha256:${HEX}`, signatures: [{ digest: 'sha256:AB', size: 1 }] } } }), 'b')).toThrow(/release signature blobs digest "sha256:AB"/);
    expect(() => checkMetadataNames(metadata({}, { signatures: { release: { digest: 'x', signatures: [] } } }), 'b')).toThrow(/signed digest "x"/);
  });
  it('refuses an operator catalog whose record would become a request path or a path inside an image', () => {
    const catalog = { reference: 'registry.redhat.io/redhat/redhat-operator-index:v4.16', source: `registry.redhat.io/redhat/redhat-operator-index@sha256:${HEX}`, image: `registry.redhat.io/redhat/redhat-operator-index@sha256:${HEX}`, rebuilt: true, configsDir: '/configs', packages: ['etcd'], bundles: ['etcd.v1.0.0'], tag: 'v4.16' };
    const recorded = (fields: object) => metadata({}, { operators: { catalogs: [{ ...catalog, ...fields }] } });
    expect(() => checkMetadataNames(recorded({ targetCatalog: 'olm/index' }), 'b')).not.toThrow();
    expect(() => checkMetadataNames(recorded({ targetCatalog: '../tenant-b/index' }), 'b')).toThrow(/names catalog targetCatalog "\.\.\/tenant-b\/index", which is not a repository path/);
    expect(() => checkMetadataNames(recorded({ tag: '../x' }), 'b')).toThrow(/names catalog tag "\.\.\/x", which is not a tag/);
    expect(() => checkMetadataNames(recorded({ image: 'registry.redhat.io/redhat/redhat-operator-index:v4.16' }), 'b')).toThrow(/names catalog image .*, not an image reference by digest/);
    expect(() => checkMetadataNames(recorded({ configsDir: '/configs/../../etc' }), 'b')).toThrow(/names catalog configsDir "\/configs\/\.\.\/\.\.\/etc", which is not a directory inside an image/);
  });
});

describe('checkBound', () => {
  it('passes a file at its bound and refuses one byte more, naming the file and the bound', () => {
    expect(() => checkBound('index.json', READ_BOUNDS['index.json'], 'b/index.json')).not.toThrow();
    expect(() => checkBound('index.json', 600 * 1024 * 1024, 'b/index.json')).toThrow(new BadInputError("b/index.json is 600.0 MiB, over the 8.0 MiB bound for a bundle's index.json; the bundle was altered or damaged: create it again"));
  });
});
