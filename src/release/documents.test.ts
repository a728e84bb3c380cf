import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { COMPONENTS } from '../../fixtures/components.js';
import { operatorManifestFiles } from '../../fixtures/manifests.js';
import { collectDocuments, parseDocuments, parseFile, type ParsedFile } from './documents.js';

/** What planning must get: every object document, kept whole if it names a digest or is a ConfigMap, else kind + annotations. */
function expected(files: ReadonlyMap<string, string>): Array<{ file: string; doc: unknown }> {
  const out: Array<{ file: string; doc: unknown }> = [];
  for (const file of [...files.keys()].sort()) {
    if (!/\.(ya?ml|json)$/.test(file)) continue;
    for (const doc of yaml.loadAll(files.get(file)!) as Array<Record<string, unknown> | null>) {
      if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) continue;
      const whole = doc.kind === 'ConfigMap' || JSON.stringify(doc).includes('@sha256:');
      const annotations = (doc.metadata as { annotations?: unknown } | undefined)?.annotations;
      out.push({ file, doc: whole ? doc : { kind: doc.kind, ...(annotations !== undefined ? { metadata: { annotations } } : {}) } });
    }
  }
  return out;
}

const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    capability.openshift.io/name: Console
    include.release.openshift.io/self-managed-high-availability: "true"
  name: consoles.operator.openshift.io
spec:
  group: operator.openshift.io
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        description: |
          Console provides a means to configure an operator.
          kind: NotTheKind
        type: object
`;

describe('parseDocuments', () => {
  it("gives the fixture release's manifests exactly what a full parse gives", () => {
    const files = operatorManifestFiles({ version: '4.16.3', components: COMPONENTS, pullSpec: (name) => `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${name.length.toString(16).padStart(64, '0')}` });
    expect([...files.keys()].filter((f) => f.endsWith('.yaml')).length).toBeGreaterThan(100);
    const warnings: string[] = [];
    expect(parseDocuments(files, warnings)).toEqual(expected(files));
    expect(warnings).toEqual([]);
  });

  it.each([
    ['a CRD cut at spec', CRD],
    ['several documents, an empty one and a comment', `# leading comment\n---\n${CRD}---\n---\n${CRD.replace('Console', 'Insights')}`],
    ['keys in another order (metadata after spec)', 'apiVersion: v1\nkind: Namespace\nspec:\n  x: 1\nmetadata:\n  annotations:\n    a: b\n'],
    ['no metadata at all', 'apiVersion: v1\nkind: Namespace\nspec:\n  x: 1\n'],
    ['a sequence value at column 0 under metadata', 'kind: A\nmetadata:\n  annotations:\n    a: b\n  finalizers:\n  - x\nspec:\n- 1\n'],
    ['quoted keys and flow metadata', 'kind: "A"\nmetadata: {annotations: {a: b}}\nstatus: {}\n'],
    ['a JSON file', JSON.stringify({ kind: 'A', metadata: { annotations: { a: 'b' } }, spec: {} }, null, 2)],
    ['a digest in the spec (parsed whole)', `${CRD}  image: quay.io/a/b@sha256:${'a'.repeat(64)}\n`],
    ['a ConfigMap', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n'],
    ['an end marker', `${CRD}...\n`],
    ['a marker as the last line, no newline after it', `${CRD}---`],
    ['a marker first, blank lines and markers with trailing blanks', `---\n\n${CRD}--- \t\n\n${CRD}`],
    ['a leading newline and no newline at the end', `\n${CRD.trimEnd()}`],
    ['CRLF line ends', CRD.replaceAll('\n', '\r\n') + '---\r\n' + CRD.replaceAll('\n', '\r\n')],
    ['content on a marker line', `${CRD}--- # next\n${CRD}`],
    ['a head that is no object (parsed whole)', 'kind: A\nmetadata: x\n? [a]\n: b\nspec: 1\n'],
  ])('matches a full parse: %s', (_what, text) => {
    const file = text.startsWith('{') ? 'x.json' : 'x.yaml';
    const files = new Map([[file, text]]);
    const warnings: string[] = [];
    expect(parseDocuments(files, warnings)).toEqual(expected(files));
    expect(warnings).toEqual([]);
  });

  it('reads a document that names no image no further than its metadata', () => {
    const warnings: string[] = [];
    const text = 'kind: A\nmetadata:\n  annotations:\n    a: b\nspec: [never, closed\n';
    expect(parseDocuments(new Map([['0000_a.crd.yaml', text]]), warnings)).toEqual([{ file: '0000_a.crd.yaml', doc: { kind: 'A', metadata: { annotations: { a: 'b' } } } }]);
    expect(warnings).toEqual([]);
  });

  it('skips a file that does not parse, with a warning naming it', () => {
    const warnings: string[] = [];
    expect(parseDocuments(new Map([['0000_bad.yaml', 'kind: A\nmetadata: [\n']]), warnings)).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/^skipped unparsable manifest 0000_bad\.yaml: /)]);
  });

  it('ignores files that are not YAML or JSON', () => {
    expect(parseDocuments(new Map([['image-references', '{"kind":"ImageStream"}'], ['release-metadata', '{}']]), [])).toEqual([]);
  });

  it('gives the documents and warnings in the order of the file names, whatever order the files were parsed in', () => {
    const files = new Map([
      ['0000_c.yaml', CRD.replace('Console', 'Insights')],
      ['0000_b_bad.yaml', 'kind: A\nmetadata: [\n'],
      ['image-references', '{"kind":"ImageStream"}'],
      ['0000_a.yaml', CRD],
      ['0000_d_bad.yaml', 'kind: B\nmetadata: {\n'],
    ]);
    // As a layer's entries come: not sorted.
    const parsed = new Map<string, ParsedFile>([...files].map(([file, text]) => [file, parseFile(file, text)]));
    const warnings: string[] = [];
    const wholeWarnings: string[] = [];
    const documents = collectDocuments(parsed, warnings);
    expect(documents.map((d) => d.file)).toEqual(['0000_a.yaml', '0000_c.yaml']);
    expect(documents).toEqual(parseDocuments(files, wholeWarnings));
    expect(warnings).toEqual([expect.stringMatching(/^skipped unparsable manifest 0000_b_bad\.yaml: /), expect.stringMatching(/^skipped unparsable manifest 0000_d_bad\.yaml: /)]);
    expect(warnings).toEqual(wholeWarnings);
  });
});
