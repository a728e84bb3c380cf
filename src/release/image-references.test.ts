import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { parseImageReferences, parseReleaseMetadata } from './image-references.js';

const d = (c: string) => `sha256:${c.repeat(64)}`;
const stream = (tags: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({ kind: 'ImageStream', apiVersion: 'image.openshift.io/v1', metadata: { name: '4.16.3' }, spec: { tags }, ...extra });
const tag = (name: string, from: string, kind = 'DockerImage') => ({ name, from: { kind, name: from } });

describe('image-references', () => {
  it('reads components sorted by name with normalised digest pullspecs', () => {
    const refs = parseImageReferences(stream([tag('etcd', `quay.io/ocp/art@${d('b')}`), tag('cli', `quay.io/ocp/art@${d('a')}`)]), 'rel');
    expect(refs.version).toBe('4.16.3');
    expect(refs.components.map((c) => [c.name, c.pullSpec])).toEqual([
      ['cli', `quay.io/ocp/art@${d('a')}`],
      ['etcd', `quay.io/ocp/art@${d('b')}`],
    ]);
  });

  it('dedupes tags that point at the same digest and keeps every name', () => {
    const refs = parseImageReferences(stream([tag('ovn-kubernetes', `q.io/a/b@${d('c')}`), tag('ovn-kubernetes-microshift', `q.io/a/b@${d('c')}`)]), 'rel');
    expect(refs.components).toHaveLength(1);
    expect(refs.components[0]!.names).toEqual(['ovn-kubernetes', 'ovn-kubernetes-microshift']);
  });

  it('skips tags whose from.kind is not DockerImage, with a warning', () => {
    const refs = parseImageReferences(stream([tag('a', `q.io/a/b@${d('c')}`), tag('istag', 'a:b', 'ImageStreamTag')]), 'rel');
    expect(refs.components.map((c) => c.name)).toEqual(['a']);
    expect(refs.warnings).toEqual(['skipped tag istag: from.kind is ImageStreamTag, not DockerImage']);
  });

  it.each([
    [JSON.stringify({ kind: 'Deployment', apiVersion: 'apps/v1' }), /kind "Deployment".*ImageStream/],
    [stream([tag('a', `q.io/a/b@${d('c')}`)]).replace('image.openshift.io/v1', 'v1'), /apiVersion "v1"/],
    [stream([tag('cli', 'quay.io/ocp/art:latest')]), /tag cli references quay.io\/ocp\/art:latest by tag/],
    [stream([tag('cli', 'not a ref')]), /tag cli: invalid image reference/],
    ['not json', /not valid JSON/],
    [stream([]), /no DockerImage tags/],
  ])('rejects invalid content: %#', (text, message) => {
    expect(() => parseImageReferences(text, 'rel')).toThrow(BadInputError);
    expect(() => parseImageReferences(text, 'rel')).toThrow(message);
  });
});

describe('release-metadata', () => {
  it('reads channels sorted and the multi architecture marker', () => {
    const warnings: string[] = [];
    const meta = parseReleaseMetadata(JSON.stringify({
      kind: 'cincinnati-metadata-v0', version: '4.16.3', previous: ['4.16.2'],
      metadata: { 'io.openshift.upgrades.graph.release.channels': 'stable-4.16,candidate-4.16', 'release.openshift.io/architecture': 'multi' },
    }), warnings);
    expect(meta).toMatchObject({ version: '4.16.3', channels: ['candidate-4.16', 'stable-4.16'], previous: ['4.16.2'], architecture: 'multi' });
    expect(warnings).toEqual([]);
  });
});
