import { describe, expect, it } from 'vitest';
import { parseReference } from './reference.js';
import { applyMirrors, parseMirrorRule } from './mirrors.js';

const D = `sha256:${'b'.repeat(64)}`;

describe('mirrors', () => {
  it('maps the longest matching source prefix and keeps the digest', () => {
    const rules = ['quay.io=mirror.local:5000', 'quay.io/openshift-release-dev=mirror.local:5000/ocp'].map(parseMirrorRule);
    expect(applyMirrors(parseReference(`quay.io/openshift-release-dev/ocp-v4.0-art-dev@${D}`), rules)).toEqual({
      registry: 'mirror.local:5000', repository: 'ocp/ocp-v4.0-art-dev', digest: D,
    });
    expect(applyMirrors(parseReference('quay.io/other/app:1'), rules)).toEqual({ registry: 'mirror.local:5000', repository: 'other/app', tag: '1' });
  });
  it('matches whole path components only', () => {
    const rules = [parseMirrorRule('quay.io/openshift=m.local/x')];
    expect(applyMirrors(parseReference('quay.io/openshift-release-dev/a:1'), rules).registry).toBe('quay.io');
  });
  it('rejects rules without SOURCE=MIRROR', () => {
    expect(() => parseMirrorRule('quay.io')).toThrow(/expected SOURCE=MIRROR/);
  });
});
