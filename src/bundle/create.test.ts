import { describe, expect, it } from 'vitest';
import type { PlanRelease } from '../plan/types.js';
import { releaseTags } from './create.js';

const release = (architecture: string, multiArch = false): PlanRelease => ({
  pullSpec: `quay.io/openshift-release-dev/ocp-release@sha256:${'a'.repeat(64)}`,
  digest: `sha256:${'a'.repeat(64)}`,
  manifestDigest: `sha256:${'a'.repeat(64)}`,
  version: '4.16.3',
  architecture,
  multiArch,
  channels: [],
});

describe('release tags for the mirror', () => {
  it('spells the architecture as OpenShift release tags do, -multi for a multi-arch release', () => {
    expect(releaseTags(release('amd64'))).toEqual(['4.16.3-x86_64']);
    expect(releaseTags(release('arm64'))).toEqual(['4.16.3-aarch64']);
    expect(releaseTags(release('s390x'))).toEqual(['4.16.3-s390x']);
    expect(releaseTags(release('arm64', true))).toEqual(['4.16.3-multi']);
  });

  it('adds the tag the release was named by, once', () => {
    expect(releaseTags(release('amd64'), '4.16.3-x86_64')).toEqual(['4.16.3-x86_64']);
    expect(releaseTags(release('amd64'), 'latest-4.16')).toEqual(['4.16.3-x86_64', 'latest-4.16']);
  });
});
