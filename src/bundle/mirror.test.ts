import { describe, expect, it } from 'vitest';
import yaml from 'js-yaml';
import { mirroredImage, parseMirrorTarget, renderImageDigestMirrorSet, renderMapping, repositoryMirrors } from './mirror.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;
const ART = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`;
const RELEASE = `quay.io/openshift-release-dev/ocp-release@sha256:${'b'.repeat(64)}`;

describe('mirror targets', () => {
  it('splits REGISTRY[/PREFIX] and refuses a target without a host', () => {
    expect(parseMirrorTarget('mirror.example.com:5000/ocp/4.16/')).toEqual({ registry: 'mirror.example.com:5000', prefix: 'ocp/4.16' });
    expect(parseMirrorTarget('127.0.0.1:5000')).toEqual({ registry: '127.0.0.1:5000', prefix: '' });
    expect(() => parseMirrorTarget('ocp/mirror')).toThrow(/expected REGISTRY\[\/PREFIX\] with a host name/);
    expect(() => parseMirrorTarget('mirror.example.com/Upper')).toThrow(/invalid push target/);
  });

  it('keeps the source repository path under the prefix and the digest', () => {
    expect(mirroredImage(ART, parseMirrorTarget('mirror:5000/prefix'))).toEqual({
      source: ART,
      mirror: `mirror:5000/prefix/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    });
    expect(mirroredImage(ART, parseMirrorTarget('mirror.local')).mirror).toBe(`mirror.local/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`);
  });

  it('places images as the --mirror rule SOURCE=REGISTRY/PATH reads them, refusing one outside SOURCE', () => {
    const target = parseMirrorTarget('quay.io/openshift-release-dev=mirror.example.com:5000/ocp');
    expect(target).toMatchObject({ registry: 'mirror.example.com:5000', prefix: 'ocp' });
    expect(mirroredImage(ART, target).mirror).toBe(`mirror.example.com:5000/ocp/ocp-v4.0-art-dev@${DIGEST}`);
    expect(() => mirroredImage(`quay.io/other/app@${DIGEST}`, target)).toThrow(/quay\.io\/other\/app@sha256:a+ is not under quay\.io\/openshift-release-dev/);
    expect(() => parseMirrorTarget('quay.io=ocp')).toThrow(/invalid push target "ocp"/);
  });

  it('refuses two source registries that would share one mirror repository', () => {
    const target = parseMirrorTarget('mirror.local/m');
    const images = [ART, `registry.redhat.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`].map((s) => mirroredImage(s, target));
    expect(() => repositoryMirrors(images)).toThrow(/would both be mirrored to mirror\.local\/m\/openshift-release-dev\/ocp-v4\.0-art-dev/);
  });
});

describe('cluster configuration for the mirror', () => {
  const target = parseMirrorTarget('mirror:5000/prefix');
  const images = [ART, RELEASE].map((s) => mirroredImage(s, target));

  it('writes mapping.txt as sorted source=mirror lines', () => {
    expect(renderMapping(images).split('\n')).toEqual([
      `${RELEASE}=mirror:5000/prefix/openshift-release-dev/ocp-release@sha256:${'b'.repeat(64)}`,
      `${ART}=mirror:5000/prefix/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
      '',
    ]);
  });

  it('writes one ImageDigestMirrorSet entry per source repository', () => {
    const doc = yaml.load(renderImageDigestMirrorSet('prestage-4.16.3', images)) as { apiVersion: string; kind: string; metadata: { name: string }; spec: { imageDigestMirrors: unknown } };
    expect(doc.apiVersion).toBe('config.openshift.io/v1');
    expect(doc.kind).toBe('ImageDigestMirrorSet');
    expect(doc.metadata.name).toBe('prestage-4.16.3');
    expect(doc.spec.imageDigestMirrors).toEqual([
      { source: 'quay.io/openshift-release-dev/ocp-release', mirrors: ['mirror:5000/prefix/openshift-release-dev/ocp-release'] },
      { source: 'quay.io/openshift-release-dev/ocp-v4.0-art-dev', mirrors: ['mirror:5000/prefix/openshift-release-dev/ocp-v4.0-art-dev'] },
    ]);
  });
});
