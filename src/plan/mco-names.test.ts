import { describe, expect, it } from 'vitest';
import { checkMcoNames, mcoNameRejection } from './mco-names.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;

describe('names MCO PinnedImageSet accepts (openshift/api CEL rules)', () => {
  it.each([
    `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    `quay.io/ocp-release@${DIGEST}`,
    `127.0.0.1:5000/openshift-release-dev/ocp-release@${DIGEST}`,
    `mirror.example.com:5000/ocp/release@${DIGEST}`,
    `registry.redhat.io/ubi9@${DIGEST}`,
  ])('accepts %s', (name) => {
    expect(mcoNameRejection(name)).toBeUndefined();
  });

  it.each([
    [`localhost:5000/openshift-release-dev/ocp-release@${DIGEST}`, 'its registry host localhost:5000 is not a dotted name or IP address'],
    [`registry:5000/ocp/release@${DIGEST}`, 'its registry host registry:5000 is not a dotted name or IP address'],
    [`mirror.example.com:5000/prefix/openshift/release-images@${DIGEST}`, 'its repository path has more than one namespace segment'],
    [`mirror.example.com/a/b/c@${DIGEST}`, 'its repository path has more than one namespace segment'],
    [`quay.io/openshift-release-dev/ocp-release:4.16.3`, 'it is not NAME@sha256:DIGEST'],
    [`quay.io/ocp@sha256:${'A'.repeat(64)}`, 'its digest is not sha256:<64 hex>'],
    [`quay.io/ocp@sha512:${'a'.repeat(128)}`, 'its digest is not sha256:<64 hex>'],
    [`quay.io:123456/ocp/release@${DIGEST}`, 'its registry host quay.io:123456 is not a dotted name or IP address'],
  ])('rejects %s: %s', (name, why) => {
    expect(mcoNameRejection(name)).toBe(why);
  });

  it('names the first rejected image in one line, with the fix', () => {
    const bad = `localhost:5000/ocp/release@${DIGEST}`;
    expect(() => checkMcoNames([`quay.io/ocp/release@${DIGEST}`, bad, `localhost:1/x@${DIGEST}`])).toThrow(
      `MCO's PinnedImageSet would reject ${bad}: its registry host localhost:5000 is not a dotted name or IP address; plan the release by its source name (quay.io/...) with --mirror SOURCE=MIRROR, which keeps the source names, or use --api prestage (the prestage agent)`,
    );
    expect(() => checkMcoNames([`quay.io/ocp/release@${DIGEST}`])).not.toThrow();
  });
});
