/**
 * OpenShift release signatures, verified as the cluster-version operator does (library-go
 * pkg/verify): an OpenPGP signed message by a trusted key whose literal data is an "atomic
 * container signature" naming the release digest. openpgp.js reads keys and v4 signatures;
 * Red Hat's signing service writes v3 signature packets, which openpgp.js drops unread, so
 * those are checked here (RSA over node:crypto), as Go's x/crypto/openpgp accepts them.
 */
import { createPublicKey, verify as cryptoVerify } from 'node:crypto';
import * as openpgp from 'openpgp';
import type { PublicKey, Subkey } from 'openpgp';
import { BadInputError } from '../errors.js';
import { packetsOf } from './openpgp-packets.js';

export interface VerificationKeys {
  readonly keys: readonly PublicKey[];
  /** one per key: "<40-hex fingerprint> <first user id>" */
  readonly names: readonly string[];
  /** The public keys re-armored from their packets (never the input's text): what a bundle stores. */
  readonly armored: string;
}

export type SignatureProblem = 'not-a-signature' | 'unknown-key' | 'bad-signature' | 'wrong-type' | 'wrong-digest' | 'no-identity';

export type SignatureVerdict =
  | { readonly ok: true; readonly identity: string; readonly signedBy: string }
  | { readonly ok: false; readonly problem: SignatureProblem; readonly detail: string };

const KEY_EXAMPLE = "Red Hat's https://access.redhat.com/security/data/fd431d51.txt or a verifier-public-key-* value of the release's verification ConfigMap";

/** OpenPGP packet tags of secret keys (RFC 4880 5.5.1.3, 5.5.1.4). */
const SECRET_KEY_TAGS = new Set([5, 7]);

/**
 * Parses OpenPGP public keys, ASCII-armored or binary; `where` names each input in messages.
 * The packets decide, not the armor header: any secret-key packet refuses the input (a secret
 * key is never a verification key, and must not travel into a bundle).
 */
export async function readVerificationKeys(inputs: ReadonlyArray<{ text: string | Uint8Array; where: string }>): Promise<VerificationKeys> {
  const keys: PublicKey[] = [];
  for (const { text, where } of inputs) {
    const refuse = (reason: string): BadInputError => new BadInputError(`${where} is not an OpenPGP public key (${reason}); pass the release key file (ASCII-armored or binary), e.g. ${KEY_EXAMPLE}`);
    const secret = (tag: number): BadInputError => new BadInputError(`${where} holds an OpenPGP secret key (packet tag ${tag}), which is never a verification key; pass only its public key (gpg --armor --export KEYID), and treat that secret key as exposed`);
    const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : Buffer.from(text);
    if (!bytes.toString('latin1').trim()) throw refuse('it is empty');
    let binary: Uint8Array = bytes;
    if (/^\s*-----BEGIN PGP /.test(bytes.subarray(0, 256).toString('latin1'))) {
      try {
        binary = (await openpgp.unarmor(bytes.toString('utf8'))).data as Uint8Array;
      } catch (err) {
        throw refuse(`its armor does not decode: ${firstLine(err)}`);
      }
    } else if (!(bytes[0]! & 0x80)) {
      throw refuse('neither ASCII armor nor OpenPGP packets');
    }
    // Before openpgp.js builds key objects: a secret packet anywhere, whatever the header said.
    let tags: number[] = [];
    try {
      tags = packetsOf(Buffer.from(binary)).map((p) => p.tag);
    } catch {
      // Malformed: openpgp.js says why below.
    }
    const secretTag = tags.find((tag) => SECRET_KEY_TAGS.has(tag));
    if (secretTag !== undefined) throw secret(secretTag);
    let read: openpgp.Key[];
    try {
      read = await openpgp.readKeys({ binaryKeys: binary });
    } catch (err) {
      throw refuse(/Error during parsing/.test(firstLine(err)) ? 'it holds no OpenPGP key' : firstLine(err));
    }
    if (read.some((key) => key.isPrivate())) throw secret(5);
    for (const key of read) if (!keys.some((k) => k.getFingerprint() === key.getFingerprint())) keys.push(key.toPublic());
  }
  return {
    keys,
    names: keys.map((k) => `${k.getFingerprint().toUpperCase()} ${k.getUserIDs()[0] ?? '(no user id)'}`),
    armored: keys.map((k) => k.armor()).join('\n'),
  };
}

export type IntegrityVerdict =
  | { readonly ok: true; readonly identity: string; readonly keyId: string }
  | { readonly ok: false; readonly problem: SignatureProblem; readonly detail: string };

/**
 * A signature judged WITHOUT a key: an OpenPGP signed message whose payload is an atomic
 * container signature of `releaseDigest` with an identity, and the key id it claims. Anyone can
 * make one; it says the bytes are well-formed and meant for this release, never who signed.
 */
export async function inspectReleaseSignature(bytes: Uint8Array, releaseDigest: string): Promise<IntegrityVerdict> {
  let binary: Uint8Array;
  let verified: { data: Uint8Array; signatures: ReadonlyArray<{ keyID: openpgp.KeyID; verified: Promise<true> }> };
  try {
    binary = await dearmor(bytes);
    const message = await openpgp.readMessage({ binaryMessage: binary });
    verified = await openpgp.verify({ message, verificationKeys: [], expectSigned: false, format: 'binary' });
  } catch (err) {
    return unreadable(bytes, err);
  }
  // No key to check with: each signature's check fails by design, and is not awaited.
  for (const s of verified.signatures) s.verified.catch(() => undefined);
  let data: Uint8Array;
  let keyId: string;
  if (verified.signatures.length > 0) {
    data = verified.data;
    keyId = verified.signatures[0]!.keyID.toHex();
  } else {
    const v3 = v3Parts(binary);
    if (!v3.ok) return v3.verdict;
    data = v3.literal;
    keyId = v3.keyId;
  }
  const checked = checkPayload(data, releaseDigest, '');
  return checked.ok ? { ok: true, identity: checked.identity, keyId: keyId.toUpperCase() } : checked;
}

/** The verdict on one signature for `releaseDigest`; bad bytes are a verdict, never a throw. */
export async function verifyReleaseSignature(bytes: Uint8Array, releaseDigest: string, keys: VerificationKeys): Promise<SignatureVerdict> {
  let binary: Uint8Array;
  let verified: { data: Uint8Array; signatures: ReadonlyArray<{ keyID: openpgp.KeyID; verified: Promise<true> }> };
  try {
    binary = await dearmor(bytes);
    const message = await openpgp.readMessage({ binaryMessage: binary });
    verified = await openpgp.verify({ message, verificationKeys: [...keys.keys], expectSigned: false, format: 'binary' });
  } catch (err) {
    return unreadable(bytes, err);
  }
  if (verified.signatures.length === 0) return verifyV3(binary, releaseDigest, keys);
  const known = verified.signatures.find((s) => keyIndex(keys, s.keyID.toHex()) >= 0);
  if (!known) return unknownKey(verified.signatures[0]!.keyID.toHex());
  try {
    await known.verified;
  } catch (err) {
    return fail('bad-signature', `its signature by key ${known.keyID.toHex().toUpperCase()} does not verify (${firstLine(err)})`);
  }
  return checkPayload(verified.data, releaseDigest, keys.names[keyIndex(keys, known.keyID.toHex())]!);
}

function fail(problem: SignatureProblem, detail: string): SignatureVerdict {
  return failed(problem, detail);
}

function failed(problem: SignatureProblem, detail: string): SignatureVerdict & { ok: false } {
  return { ok: false, problem, detail };
}

function unknownKey(keyId: string): SignatureVerdict {
  return fail('unknown-key', `signed by key ${keyId.toUpperCase()}, which is not a verification key`);
}

/** Why bytes are no signed message, in a few words: often an HTML error page or a cut download. */
function unreadable(bytes: Uint8Array, err: unknown): SignatureVerdict & { ok: false } {
  const text = Buffer.from(bytes.subarray(0, 24)).toString('latin1');
  const message = firstLine(err);
  const reason =
    bytes.length === 0 ? 'it is empty'
    : /^[\x20-\x7e\r\n\t]+$/.test(text) && !text.startsWith('-----BEGIN PGP') ? `it is text: ${JSON.stringify(text.trim())}${bytes.length > 24 ? '...' : ''}`
    : /unexpected end of (file|data)|end of packet data/i.test(message) ? 'it ends early: truncated?'
    : /Error during parsing/.test(message) ? 'no OpenPGP packet structure'
    : `${message.replace(/^Parsing (\w+)Packet failed: /, '$1 packet: ')}; corrupt?`;
  return failed('not-a-signature', `not an OpenPGP signed message (${reason})`);
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!.replace(/^Error (verifying|reading) [^:]*: /, '');
}

/** Binary bytes of an armored message, else the bytes themselves. */
async function dearmor(bytes: Uint8Array): Promise<Uint8Array> {
  const head = Buffer.from(bytes.subarray(0, 64)).toString('latin1').trimStart();
  if (!head.startsWith('-----BEGIN PGP MESSAGE-----')) return bytes;
  const { data } = await openpgp.unarmor(Buffer.from(bytes).toString('utf8'));
  if (!(data instanceof Uint8Array)) throw new Error('armor did not decode');
  return data;
}

/** The index in `keys` of the key (or subkey) with the 16-hex key id, or -1. */
function keyIndex(keys: VerificationKeys, keyId: string): number {
  return keys.keys.findIndex((k) => k.getKeys().some((sub) => sub.getKeyID().toHex() === keyId));
}

/** The checks of library-go's verifyAtomicContainerSignature (which also refuses unknown fields). */
function checkPayload(data: Uint8Array, releaseDigest: string, signedBy: string): SignatureVerdict {
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return fail('wrong-type', 'its signed payload is not JSON, so not an atomic container signature');
  }
  const shape = shapeError(payload, PAYLOAD_SHAPE, '');
  if (shape) return fail('wrong-type', `its signed payload ${shape}, which the CVO refuses`);
  const critical = field(payload, 'critical');
  const type = field(critical, 'type');
  if (type !== 'atomic container signature') return fail('wrong-type', `its type is ${JSON.stringify(type ?? '')}, not "atomic container signature"`);
  const digest = field(field(critical, 'image'), 'docker-manifest-digest');
  if (digest !== releaseDigest) return fail('wrong-digest', `it signs ${digest || 'no digest'}, not ${releaseDigest}`);
  const identity = field(field(critical, 'identity'), 'docker-reference');
  if (typeof identity !== 'string' || !identity) return fail('no-identity', 'it names no identity (critical.identity.docker-reference is empty)');
  return { ok: true, identity, signedBy };
}

type Shape = 'string' | 'integer' | { readonly [field: string]: Shape };

/** The Go struct the CVO decodes into: other fields fail its DisallowUnknownFields decoder. */
const PAYLOAD_SHAPE: Shape = {
  critical: { type: 'string', image: { 'docker-manifest-digest': 'string' }, identity: { 'docker-reference': 'string' } },
  optional: { creator: 'string', timestamp: 'integer' },
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A member as Go's encoding/json finds it: the exact name, else any case. */
function field(value: unknown, name: string): unknown {
  if (!isObject(value)) return undefined;
  if (name in value) return value[name];
  const key = Object.keys(value).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : value[key];
}

function shapeError(value: unknown, shape: Shape, path: string): string | undefined {
  if (value === null) return undefined; // Go decodes null into anything as "no value"
  if (shape === 'string') return typeof value === 'string' ? undefined : `has a non-string ${path}`;
  if (shape === 'integer') return Number.isInteger(value) ? undefined : `has a non-integer ${path}`;
  if (!isObject(value)) return path ? `has a non-object ${path}` : 'is not a JSON object';
  for (const [key, inner] of Object.entries(value)) {
    const name = Object.keys(shape).find((k) => k === key.toLowerCase());
    if (!name) return `has the unknown field ${path ? `${path}.` : ''}${key}`;
    const error = shapeError(inner, shape[name]!, path ? `${path}.${name}` : name);
    if (error) return error;
  }
  return undefined;
}

// ---- v3 signature packets (RFC 4880 5.2.2), which openpgp.js no longer reads ----

const HASHES: Readonly<Record<number, string>> = { 8: 'sha256', 9: 'sha384', 10: 'sha512', 11: 'sha224' };

/** The v3 signature packet, its key id and the literal data it signs, or why there are none. */
function v3Parts(binary: Uint8Array): { ok: true; sig: Buffer; literal: Buffer; keyId: string } | { ok: false; verdict: SignatureVerdict & { ok: false } } {
  try {
    const packets = packetsOf(Buffer.from(binary));
    const signature = packets.find((p) => p.tag === 2);
    const data = packets.find((p) => p.tag === 11);
    if (!signature || !data) return { ok: false, verdict: failed('not-a-signature', 'an OpenPGP message without a signature or without signed data') };
    if (signature.body[0] !== 3) return { ok: false, verdict: failed('not-a-signature', `its signature packet (version ${signature.body[0]}) is not supported`) };
    const sig = signature.body;
    if (sig.length < 22 || sig[1] !== 5) throw new Error('malformed v3 signature packet');
    return { ok: true, sig, literal: data.body.subarray(2 + data.body[1]! + 4), keyId: sig.subarray(7, 15).toString('hex') };
  } catch (err) {
    return { ok: false, verdict: unreadable(binary, err) };
  }
}

async function verifyV3(binary: Uint8Array, releaseDigest: string, keys: VerificationKeys): Promise<SignatureVerdict> {
  const parts = v3Parts(binary);
  if (!parts.ok) return parts.verdict;
  const { sig, literal, keyId } = parts;
  const index = keyIndex(keys, keyId);
  if (index < 0) return unknownKey(keyId);
  const reason = await v3Failure(keys.keys[index]!, keyId, sig, literal);
  if (reason) return fail('bad-signature', `its v3 signature by key ${keyId.toUpperCase()} does not verify (${reason})`);
  return checkPayload(literal, releaseDigest, keys.names[index]!);
}

/** Why a v3 signature over `literal` fails, or undefined when it is valid. */
async function v3Failure(key: PublicKey, keyId: string, sig: Buffer, literal: Buffer): Promise<string | undefined> {
  const [sigClass, pkAlgorithm, hashAlgorithm] = [sig[2]!, sig[15]!, sig[16]!];
  const hash = HASHES[hashAlgorithm];
  if (!hash) return `hash algorithm ${hashAlgorithm} is not accepted`;
  if (pkAlgorithm !== 1 && pkAlgorithm !== 3) return `public-key algorithm ${pkAlgorithm} is not supported in v3 signatures`;
  if (sigClass !== 0 && sigClass !== 1) return `signature class ${sigClass} does not sign a document`;
  let signer: PublicKey | Subkey;
  try {
    signer = await key.getSigningKey(key.getKeys().find((k) => k.getKeyID().toHex() === keyId)!.getKeyID(), null);
  } catch (err) {
    return firstLine(err);
  }
  const { n, e } = signer.keyPacket.publicParams as { n?: Uint8Array; e?: Uint8Array };
  if (!n || !e) return 'the key is not an RSA key';
  const bits = sig.readUInt16BE(19);
  const mpi = sig.subarray(21, 21 + Math.ceil(bits / 8));
  if (mpi.length > n.length) return 'malformed signature value';
  const signed = Buffer.concat([sigClass === 1 ? Buffer.from(literal.toString('latin1').replace(/\r?\n/g, '\r\n'), 'latin1') : literal, sig.subarray(2, 7)]);
  const publicKey = createPublicKey({ key: { kty: 'RSA', n: Buffer.from(n).toString('base64url'), e: Buffer.from(e).toString('base64url') }, format: 'jwk' });
  const value = Buffer.concat([Buffer.alloc(n.length - mpi.length), mpi]);
  return cryptoVerify(hash, signed, publicKey, value) ? undefined : 'Signed digest did not match';
}
