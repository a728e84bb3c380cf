/**
 * Release signatures made by the real gpg, as the signature servers make them (`gpg --sign`:
 * compressed data holding one-pass signature, literal data and signature), and one real Red Hat
 * signature (library-go's testdata), whose v3 signature packet openpgp.js cannot read itself.
 * In the integration suite: it needs Debian's gpg, which the test bed script installs.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as openpgp from 'openpgp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadInputError } from '../src/errors.js';
import { inspectReleaseSignature, readVerificationKeys, verifyReleaseSignature, type VerificationKeys } from '../src/signatures/release-gpg.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;
const OTHER_DIGEST = `sha256:${'b'.repeat(64)}`;
const IDENTITY = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';

function payload(over: { type?: string; digest?: string; identity?: string; extra?: Record<string, unknown> } = {}): string {
  return JSON.stringify({
    critical: { type: over.type ?? 'atomic container signature', image: { 'docker-manifest-digest': over.digest ?? DIGEST }, identity: { 'docker-reference': over.identity ?? IDENTITY }, ...over.extra },
    optional: { creator: 'Red Hat OpenShift Signing Authority 0.0.1', timestamp: 1720000000 },
  });
}

let home: string;
const gpg = (...args: string[]): Buffer => execFileSync('/usr/bin/gpg', ['--batch', '--pinentry-mode', 'loopback', '--passphrase', '', ...args], { env: { ...process.env, GNUPGHOME: home }, stdio: ['ignore', 'pipe', 'pipe'] });
let release: { fpr: string; armored: string };
let other: { fpr: string; armored: string };
let keys: VerificationKeys;
let n = 0;

function generate(uid: string, algo: string): { fpr: string; armored: string } {
  gpg('--quick-gen-key', uid, algo, 'sign', 'never');
  const fpr = /^fpr:+([0-9A-F]{40}):/m.exec(gpg('--with-colons', '--list-keys', uid).toString())![1]!;
  return { fpr, armored: gpg('--armor', '--export', fpr).toString() };
}

/** `gpg --sign` of `text` by key `fpr`, with extra gpg options. */
function sign(text: string, fpr: string, ...options: string[]): Buffer {
  const input = join(home, `payload-${++n}.json`);
  writeFileSync(input, text);
  gpg('--local-user', fpr, ...options, '--output', `${input}.sig`, '--sign', input);
  return readFileSync(`${input}.sig`);
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'prestage-gpg-'));
  release = generate('Test Release <release@example.com>', 'rsa3072');
  other = generate('Other Signer <other@example.com>', 'ed25519');
  keys = await readVerificationKeys([{ text: release.armored, where: 'release.asc' }]);
});

afterAll(() => {
  execFileSync('gpgconf', ['--kill', 'gpg-agent'], { env: { ...process.env, GNUPGHOME: home } });
  rmSync(home, { recursive: true, force: true });
});

describe('verifyReleaseSignature over gpg signatures', () => {
  it('accepts a signature of the digest by a verification key, naming the identity and the key', async () => {
    const verdict = await verifyReleaseSignature(sign(payload(), release.fpr), DIGEST, keys);
    expect(verdict).toEqual({ ok: true, identity: IDENTITY, signedBy: `${release.fpr} Test Release <release@example.com>` });
    expect(keys.names).toEqual([`${release.fpr} Test Release <release@example.com>`]);
  });

  it('accepts an armored message, and every compression gpg writes', async () => {
    expect(await verifyReleaseSignature(sign(payload(), release.fpr, '--armor'), DIGEST, keys)).toMatchObject({ ok: true });
    for (const algo of ['none', 'zip', 'zlib']) {
      expect(await verifyReleaseSignature(sign(payload(), release.fpr, '--compress-algo', algo), DIGEST, keys)).toMatchObject({ ok: true });
    }
  });

  it('refuses a signature of another digest, naming both', async () => {
    const verdict = await verifyReleaseSignature(sign(payload({ digest: OTHER_DIGEST }), release.fpr), DIGEST, keys);
    expect(verdict).toEqual({ ok: false, problem: 'wrong-digest', detail: `it signs ${OTHER_DIGEST}, not ${DIGEST}` });
  });

  it('refuses a signature by a key not in the set, naming its key id', async () => {
    const verdict = await verifyReleaseSignature(sign(payload(), other.fpr), DIGEST, keys);
    expect(verdict).toEqual({ ok: false, problem: 'unknown-key', detail: `signed by key ${other.fpr.slice(-16)}, which is not a verification key` });
  });

  it('refuses another type, an empty identity and fields the CVO does not know', async () => {
    expect(await verifyReleaseSignature(sign(payload({ type: 'cosign container image signature' }), release.fpr), DIGEST, keys)).toEqual({
      ok: false,
      problem: 'wrong-type',
      detail: 'its type is "cosign container image signature", not "atomic container signature"',
    });
    expect(await verifyReleaseSignature(sign(payload({ identity: '' }), release.fpr), DIGEST, keys)).toMatchObject({ ok: false, problem: 'no-identity' });
    const extra = await verifyReleaseSignature(sign(payload({ extra: { note: 'x' } }), release.fpr), DIGEST, keys);
    expect(extra).toEqual({ ok: false, problem: 'wrong-type', detail: 'its signed payload has the unknown field critical.note, which the CVO refuses' });
    expect(await verifyReleaseSignature(sign('not json', release.fpr), DIGEST, keys)).toMatchObject({ ok: false, problem: 'wrong-type', detail: expect.stringMatching(/not JSON/) });
  });

  it('calls the first half of a signature, an HTML page and nothing not a signature, saying which', async () => {
    const whole = sign(payload(), release.fpr);
    const cases: Array<[Uint8Array, string]> = [
      [whole.subarray(0, whole.length >> 1), 'it ends early: truncated?'],
      [Buffer.from('<html><body>Access Denied</body></html>'), 'it is text: "<html><body>Access Denie"...'],
      [new Uint8Array(0), 'it is empty'],
    ];
    for (const [bytes, reason] of cases) {
      expect(await verifyReleaseSignature(bytes, DIGEST, keys)).toEqual({ ok: false, problem: 'not-a-signature', detail: `not an OpenPGP signed message (${reason})` });
    }
  });

  it('finds a flipped bit in the signed JSON: the signature no longer verifies', async () => {
    // Uncompressed, the JSON sits in the message as is: the flip changes the payload, the
    // packets still parse, and the digest of the data no longer matches the signature's.
    const plain = sign(payload(), release.fpr, '--compress-algo', 'none');
    const at = plain.indexOf('atomic container');
    plain[at] = plain[at]! ^ 0x01;
    expect(await verifyReleaseSignature(plain, DIGEST, keys)).toEqual({
      ok: false,
      problem: 'bad-signature',
      detail: `its signature by key ${release.fpr.slice(-16)} does not verify (Signed digest did not match)`,
    });
  });

  it("finds a flipped bit in gpg's compressed stream: never a changed payload accepted", async () => {
    // Deflate has no checksum: most flips still inflate, to other bytes, and the signature fails
    // (bad-signature); flips that break the deflate or packet structure are not-a-signature. A
    // few flips are accepted, and rightly: they land in bytes no signature covers (the one-pass
    // signature packet, the unhashed subpackets, deflate's padding), so the payload is the same.
    const whole = sign(payload(), release.fpr);
    const intact = await verifyReleaseSignature(whole, DIGEST, keys);
    const seen = new Set<string>();
    for (let at = 2; at < whole.length; at++) {
      const flipped = Buffer.from(whole);
      flipped[at] = flipped[at]! ^ 0x10;
      const verdict = await verifyReleaseSignature(flipped, DIGEST, keys);
      if (verdict.ok) expect(verdict).toEqual(intact);
      else seen.add(verdict.problem);
    }
    expect(seen).toContain('bad-signature');
    expect(seen).toContain('not-a-signature');
  });
});

describe('verifyReleaseSignature over other signers', () => {
  it('accepts a key and a signature made by openpgp.js itself', async () => {
    const { privateKey, publicKey } = await openpgp.generateKey({ type: 'ecc', curve: 'curve25519Legacy', userIDs: [{ name: 'openpgp.js signer' }], format: 'armored' });
    const signingKeys = await openpgp.readPrivateKey({ armoredKey: privateKey });
    const message = await openpgp.createMessage({ binary: Buffer.from(payload()) });
    const signed = await openpgp.sign({ message, signingKeys, format: 'binary' });
    const own = await readVerificationKeys([{ text: publicKey, where: 'own.asc' }]);
    expect(await verifyReleaseSignature(signed, DIGEST, own)).toEqual({ ok: true, identity: IDENTITY, signedBy: own.names[0] });
    expect(own.names[0]).toMatch(/^[0-9A-F]{40} openpgp\.js signer$/);
  });

  it("verifies a real Red Hat signature, whose v3 signature packet openpgp.js drops unread", async () => {
    const redHat = await readVerificationKeys([{ text: RED_HAT_KEY, where: 'redhat.txt' }]);
    const message = await openpgp.readMessage({ binaryMessage: RED_HAT_RHEL7_SIGNATURE });
    expect((await openpgp.verify({ message, verificationKeys: [...redHat.keys], expectSigned: false })).signatures).toHaveLength(0);
    expect(await verifyReleaseSignature(RED_HAT_RHEL7_SIGNATURE, RED_HAT_RHEL7_DIGEST, redHat)).toEqual({
      ok: true,
      identity: 'registry.access.redhat.com/rhel7:7.6',
      signedBy: '567E347AD0044ADE55BA8A5F199E2F91FD431D51 Red Hat, Inc. (release key 2) <security@redhat.com>',
    });
    expect(await verifyReleaseSignature(RED_HAT_RHEL7_SIGNATURE, DIGEST, redHat)).toMatchObject({ ok: false, problem: 'wrong-digest' });
    expect(await verifyReleaseSignature(RED_HAT_RHEL7_SIGNATURE, RED_HAT_RHEL7_DIGEST, keys)).toEqual({
      ok: false,
      problem: 'unknown-key',
      detail: 'signed by key 199E2F91FD431D51, which is not a verification key',
    });
    // A flip that still inflates changes the signed bytes; one that does not breaks the stream.
    const tampered = Buffer.from(RED_HAT_RHEL7_SIGNATURE);
    tampered[300] = tampered[300]! ^ 0x10;
    expect(await verifyReleaseSignature(tampered, RED_HAT_RHEL7_DIGEST, redHat)).toEqual({
      ok: false,
      problem: 'bad-signature',
      detail: 'its v3 signature by key 199E2F91FD431D51 does not verify (Signed digest did not match)',
    });
    const broken = Buffer.from(RED_HAT_RHEL7_SIGNATURE);
    broken[100] = broken[100]! ^ 0x10;
    expect(await verifyReleaseSignature(broken, RED_HAT_RHEL7_DIGEST, redHat)).toMatchObject({ ok: false, problem: 'not-a-signature' });
  });
});

describe('readVerificationKeys', () => {
  it('reads every key of a file holding two, naming each', async () => {
    const both = gpg('--armor', '--export', release.fpr, other.fpr).toString();
    const read = await readVerificationKeys([{ text: both, where: 'both.asc' }, { text: release.armored, where: 'again.asc' }]);
    expect(read.names).toEqual([`${release.fpr} Test Release <release@example.com>`, `${other.fpr} Other Signer <other@example.com>`]);
    expect(await verifyReleaseSignature(sign(payload(), other.fpr), DIGEST, read)).toMatchObject({ ok: true, signedBy: read.names[1] });
  });

  it('refuses garbage and an empty file, naming the input', async () => {
    const cases: Array<[string, RegExp]> = [
      ['-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nbm90IGEga2V5\n-----END PGP PUBLIC KEY BLOCK-----\n', /\(it holds no OpenPGP key\)/],
      ['{"keys": []}', /\(neither ASCII armor nor OpenPGP packets\)/],
      ['  \n', /it is empty/],
    ];
    for (const [text, reason] of cases) {
      const read = readVerificationKeys([{ text, where: 'keys/release.asc' }]);
      await expect(read).rejects.toThrow(BadInputError);
      await expect(read).rejects.toThrow(/^keys\/release\.asc is not an OpenPGP public key \(.+\); pass the release key file \(ASCII-armored or binary\), e\.g\. /);
      await expect(read).rejects.toThrow(reason);
    }
  });

  it('refuses a secret key by its packets, whatever the armor header says and in binary form too', async () => {
    const armored = gpg('--armor', '--export-secret-keys', release.fpr).toString();
    const cases: Array<[string | Uint8Array, string]> = [
      [armored, 'armored as PRIVATE'],
      [armored.replace(/PRIVATE KEY BLOCK/g, 'PUBLIC KEY BLOCK'), 'armored as PUBLIC'],
      [gpg('--export-secret-keys', release.fpr), 'binary'],
      [gpg('--export-secret-subkeys', release.fpr), 'secret subkeys only (binary)'],
    ];
    for (const [text, what] of cases) {
      const read = readVerificationKeys([{ text, where: 'keys/leaked.asc' }]);
      await expect(read, what).rejects.toThrow(BadInputError);
      await expect(read, what).rejects.toThrow(/^keys\/leaked\.asc holds an OpenPGP secret key \(packet tag [57]\), which is never a verification key; pass only its public key/);
    }
  });

  it('reads a binary public key, and keeps only public packets, re-armored, to store', async () => {
    const read = await readVerificationKeys([{ text: gpg('--export', release.fpr), where: 'release.gpg' }]);
    expect(read.names).toEqual([`${release.fpr} Test Release <release@example.com>`]);
    expect(read.armored).toMatch(/^-----BEGIN PGP PUBLIC KEY BLOCK-----/);
    const again = await openpgp.readKeys({ armoredKeys: read.armored });
    expect(again.map((k) => [k.getFingerprint().toUpperCase(), k.isPrivate()])).toEqual([[release.fpr, false]]);
  });
});

describe('inspectReleaseSignature: integrity without a key', () => {
  it('says a well-formed signature of the digest is one, naming the key id it claims and no signer', async () => {
    const verdict = await inspectReleaseSignature(sign(payload(), other.fpr), DIGEST);
    expect(verdict).toEqual({ ok: true, identity: IDENTITY, keyId: other.fpr.slice(-16) });
    expect(await inspectReleaseSignature(RED_HAT_RHEL7_SIGNATURE, RED_HAT_RHEL7_DIGEST)).toEqual({ ok: true, identity: 'registry.access.redhat.com/rhel7:7.6', keyId: '199E2F91FD431D51' });
  });

  it('refuses one for another digest, another type, and bytes that are no signed message', async () => {
    expect(await inspectReleaseSignature(sign(payload(), other.fpr), OTHER_DIGEST)).toMatchObject({ ok: false, problem: 'wrong-digest' });
    expect(await inspectReleaseSignature(sign(payload({ type: 'x' }), other.fpr), DIGEST)).toMatchObject({ ok: false, problem: 'wrong-type' });
    expect(await inspectReleaseSignature(Buffer.from('<html>'), DIGEST)).toMatchObject({ ok: false, problem: 'not-a-signature' });
  });
});

/** library-go pkg/verify/testdata: Red Hat's release key 2 and its signature of a rhel7 image. */
const RED_HAT_RHEL7_DIGEST = 'sha256:e3f12513a4b22a2d7c0e7c9207f52128113758d9d68c7d06b11a0ac7672966f7';
const RED_HAT_KEY = `
-----BEGIN PGP PUBLIC KEY BLOCK-----
Version: GnuPG v1.4.5 (GNU/Linux)

mQINBErgSTsBEACh2A4b0O9t+vzC9VrVtL1AKvUWi9OPCjkvR7Xd8DtJxeeMZ5eF
0HtzIG58qDRybwUe89FZprB1ffuUKzdE+HcL3FbNWSSOXVjZIersdXyH3NvnLLLF
0DNRB2ix3bXG9Rh/RXpFsNxDp2CEMdUvbYCzE79K1EnUTVh1L0Of023FtPSZXX0c
u7Pb5DI5lX5YeoXO6RoodrIGYJsVBQWnrWw4xNTconUfNPk0EGZtEnzvH2zyPoJh
XGF+Ncu9XwbalnYde10OCvSWAZ5zTCpoLMTvQjWpbCdWXJzCm6G+/hx9upke546H
5IjtYm4dTIVTnc3wvDiODgBKRzOl9rEOCIgOuGtDxRxcQkjrC+xvg5Vkqn7vBUyW
9pHedOU+PoF3DGOM+dqv+eNKBvh9YF9ugFAQBkcG7viZgvGEMGGUpzNgN7XnS1gj
/DPo9mZESOYnKceve2tIC87p2hqjrxOHuI7fkZYeNIcAoa83rBltFXaBDYhWAKS1
PcXS1/7JzP0ky7d0L6Xbu/If5kqWQpKwUInXtySRkuraVfuK3Bpa+X1XecWi24JY
HVtlNX025xx1ewVzGNCTlWn1skQN2OOoQTV4C8/qFpTW6DTWYurd4+fE0OJFJZQF
buhfXYwmRlVOgN5i77NTIJZJQfYFj38c/Iv5vZBPokO6mffrOTv3MHWVgQARAQAB
tDNSZWQgSGF0LCBJbmMuIChyZWxlYXNlIGtleSAyKSA8c2VjdXJpdHlAcmVkaGF0
LmNvbT6JAjYEEwECACAFAkrgSTsCGwMGCwkIBwMCBBUCCAMEFgIDAQIeAQIXgAAK
CRAZni+R/UMdUWzpD/9s5SFR/ZF3yjY5VLUFLMXIKUztNN3oc45fyLdTI3+UClKC
2tEruzYjqNHhqAEXa2sN1fMrsuKec61Ll2NfvJjkLKDvgVIh7kM7aslNYVOP6BTf
C/JJ7/ufz3UZmyViH/WDl+AYdgk3JqCIO5w5ryrC9IyBzYv2m0HqYbWfphY3uHw5
un3ndLJcu8+BGP5F+ONQEGl+DRH58Il9Jp3HwbRa7dvkPgEhfFR+1hI+Btta2C7E
0/2NKzCxZw7Lx3PBRcU92YKyaEihfy/aQKZCAuyfKiMvsmzs+4poIX7I9NQCJpyE
IGfINoZ7VxqHwRn/d5mw2MZTJjbzSf+Um9YJyA0iEEyD6qjriWQRbuxpQXmlAJbh
8okZ4gbVFv1F8MzK+4R8VvWJ0XxgtikSo72fHjwha7MAjqFnOq6eo6fEC/75g3NL
Ght5VdpGuHk0vbdENHMC8wS99e5qXGNDued3hlTavDMlEAHl34q2H9nakTGRF5Ki
JUfNh3DVRGhg8cMIti21njiRh7gyFI2OccATY7bBSr79JhuNwelHuxLrCFpY7V25
OFktl15jZJaMxuQBqYdBgSay2G0U6D1+7VsWufpzd/Abx1/c3oi9ZaJvW22kAggq
dzdA27UUYjWvx42w9menJwh/0jeQcTecIUd0d0rFcw/c1pvgMMl/Q73yzKgKYw==
=zbHE
-----END PGP PUBLIC KEY BLOCK-----
`;
const RED_HAT_RHEL7_SIGNATURE = Buffer.from(
  'owGbwMvMwMEoOU9/4l9n2UDGtYwuSWLxRQW5xZnpukWphbre/kUmaeV6SZl5MWseMlQrJRdllmQm' +
  'J+YoWSlUK2XmJqanglkp+cnZqUW6uYl5mWmpxSW6KZnpQAoopVSckWhkamaVapxmaGRqaJxokmRk' +
  'lGiUYp5skGqebGlkYJ5mamRoZGFoaGxuapFimWJmkWyeYmCWZGiYaJCYbG5mbmRpZpZmrlSro6BU' +
  'UlkAsk4psSQ/NzNZITk/ryQxMy+1SAHo2rzEktKiVCWgqsyU1LySzJJKZIcVpaalFqXmJYO1F6Wm' +
  'ZxaXFFXqJSYnpxYX6xWlpmQklugl5+fqF2Wk5phbmeuZKdWCLMwvKMnMz4P6NrkoFWhxEciEoNQU' +
  'BY/EEoUgZ1+FgNIkBQM9Y1M9A920TKBaBaDWTiZRZlYGUIjBQ5bD5BP//9ijV24ejpFe8PiL8oFT' +
  'LtMnSvPo9fpVfBUS6DrPU5nG6iloqbvwiMy0HLvHAltsLnjOF+pwFOF7qFfHPe/BA/4Lc+blhFWn' +
  '2VtkOh8W7Spi3PlAXztZKvXhZIt1bIbO3QXeedYCN45trJrYVrUg7dO5GYseM747HbXSt9s1O9ic' +
  'tTutc65t7M7FF5itj0qGrHhgumT2dbn2s9J6mq+4Hq37JHtaoFr9+ukdkirnRJfNdVe1DH/ytv3x' +
  'six2p6nTmP8cWMxnvGHz7vBKfU3X430Hj09uPMzNuiavO8dxikV5T6vezgsT1qyW+H7CZef1lxyr' +
  'nquVe5yfsulyMaP4xK6KWOlLqyMOGTRnBzytj9jmOffigcSTAfk95Z/OWTO4vZzOGsTy87r3yZBa' +
  'vgdhk/807lK6od+0ReTg3BDV4JhQ/iU/XU9KpcyZYtWVuux4bvtBCyb7Leo+/6Y21z3w5Dx2ofpX' +
  '4QvBPvaN6d5Z8mFvZsvfTzbVUF28L//UTDPz7vUdhXtyVsYsOCknXrWcpflZ8rJbPyttz2q3axYk' +
  'X775cLfj/5apxql2227vWfX5Zn2MQ+wp/j9fPJOc5M4eVTav5JtXddBWXkvn943lPCvLhaInFHt1' +
  'P393YOqOPedny5WGvbbV/pG/r1PnYoCupcaEiyaqiie0KqftVOdRkuBdknCvenpV3lz221OubWZg' +
  '0bnguSdqq16fyHJeAA=='
  ,
  'base64',
);
