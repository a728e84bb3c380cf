import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { identityMismatch, SIGSTORE_PAYLOAD_TYPE, SIGSTORE_SIGNATURE_ANNOTATION, verifySigstoreSignature } from './sigstore.js';

const REPO = 'quay.io/openshift-release-dev/ocp-v4.0-art-dev';
const DIGEST = `sha256:${'a'.repeat(64)}`;

describe('identityMismatch: the signedIdentity CRI-O checks for an image pulled by digest', () => {
  it('matchRepoDigestOrExact: the same repository with a tag or digest', () => {
    const rule = { repository: REPO, rule: 'matchRepoDigestOrExact' } as const;
    expect(identityMismatch(`${REPO}@${DIGEST}`, rule)).toBeUndefined();
    expect(identityMismatch(`${REPO}:4.16.3`, rule)).toBeUndefined();
    expect(identityMismatch(REPO, rule)).toMatch(/without a tag or digest, which signedIdentity matchRepoDigestOrExact refuses/);
    expect(identityMismatch(`quay.io/attacker/ocp-v4.0-art-dev:4.16.3`, rule)).toMatch(/^it names quay\.io\/attacker\/ocp-v4\.0-art-dev:4\.16\.3, not the repository quay\.io\/openshift-release-dev\/ocp-v4\.0-art-dev /);
    expect(identityMismatch('mirror.example.com:5000/openshift-release-dev/ocp-v4.0-art-dev:1', rule)).toMatch(/not the repository/);
    expect(identityMismatch('Not A Reference', rule)).toMatch(/is not an image reference/);
  });

  it('matchRepository: the same repository, with or without a tag', () => {
    const rule = { repository: REPO, rule: 'matchRepository' } as const;
    expect(identityMismatch(REPO, rule)).toBeUndefined();
    expect(identityMismatch(`${REPO}:x`, rule)).toBeUndefined();
    expect(identityMismatch('quay.io/openshift-release-dev/ocp-release', rule)).toMatch(/not the repository/);
  });
});

describe('verifySigstoreSignature', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const signed = (identity: string) => {
    const payload = Buffer.from(JSON.stringify({ critical: { identity: { 'docker-reference': identity }, image: { 'docker-manifest-digest': DIGEST }, type: SIGSTORE_PAYLOAD_TYPE }, optional: null }));
    return { payload, annotations: { [SIGSTORE_SIGNATURE_ANNOTATION]: sign('sha256', payload, privateKey).toString('base64') } };
  };

  it('refuses a valid signature that names another repository', () => {
    const good = signed(`${REPO}:4.16.3`);
    expect(verifySigstoreSignature(good.payload, good.annotations, DIGEST, publicKey, { repository: REPO, rule: 'matchRepoDigestOrExact' })).toEqual({ ok: true, identity: `${REPO}:4.16.3` });
    const other = signed('quay.io/someone/else:4.16.3');
    expect(verifySigstoreSignature(other.payload, other.annotations, DIGEST, publicKey, { repository: REPO, rule: 'matchRepository' })).toMatchObject({ ok: false, detail: expect.stringMatching(/^it names quay\.io\/someone\/else:4\.16\.3, not the repository/) });
  });
});
