/**
 * `plan`/`stage --signatures-from DIR`: release signatures already downloaded, for a mirror's
 * cluster. The flags alone here: what judges signatures (keys, the cluster's verifier
 * ConfigMaps, openpgp) loads only when the flag is given, so a plan without it starts lighter.
 */
import type { Argv } from 'yargs';
import type { ClusterClient } from '../cluster/connect.js';
import { BadInputError } from '../errors.js';
import type { PlanRelease } from '../plan/types.js';
import type { signatureConfigMap } from '../signatures/configmap.js';

export interface SignaturesFromFlags {
  'signatures-from'?: string;
  'verification-key': string[];
}

export function withSignaturesFromOptions<T>(y: Argv<T>): Argv<T & SignaturesFromFlags> {
  return y
    .option('signatures-from', { type: 'string', describe: 'Directory of the release\'s signatures (the store layout sha256=<hex>/signature-N, files sha256-<hex>-N, or ConfigMaps from bundle push, oc adm release mirror or oc-mirror): verified, then written as signature-configmap.yaml (plan --output-dir, -o yaml) or applied (stage), so the CVO accepts the upgrade without --force' })
    .option('verification-key', { type: 'string', array: true, default: [] as string[], describe: 'ASCII-armored OpenPGP public key the --signatures-from signatures must be made with (repeatable; default with cluster access: the keys the cluster trusts now)' }) as unknown as Argv<T & SignaturesFromFlags>;
}

/**
 * The CVO's ConfigMap for `release` from `--signatures-from`, every signature verified first
 * (with `--verification-key`, else the keys of the cluster `cluster` reaches): one line, exit
 * 2, when none verifies. Undefined without `--signatures-from`.
 */
export async function signatureConfigMapFrom(release: PlanRelease, flags: SignaturesFromFlags, cluster: (() => Promise<ClusterClient>) | undefined): Promise<{ configMap: ReturnType<typeof signatureConfigMap>; line: string } | undefined> {
  const dir = flags['signatures-from'];
  if (dir === undefined) return undefined;
  const { keysFromCluster, keysFromFiles } = await import('./signature-options.js');
  const trusted = (await keysFromFiles(flags['verification-key'])) ?? (cluster ? (await keysFromCluster(await cluster())).trusted : undefined);
  if (!trusted) throw new BadInputError('--signatures-from: no key to verify the signatures with: pass --verification-key FILE, or --kubeconfig to use the keys the cluster trusts now');
  const [{ gatherReleaseSignatures }, { signatureConfigMap }] = await Promise.all([import('../signatures/gather.js'), import('../signatures/configmap.js')]);
  const gathered = await gatherReleaseSignatures({
    digest: release.digest,
    release: `${release.version} (${release.digest})`,
    trusted,
    stores: [],
    dir,
    get: () => Promise.reject(new Error('--signatures-from reads no store')),
    allowUnsigned: false,
    warn: () => undefined,
  });
  const configMap = signatureConfigMap(release.digest, gathered.signatures);
  return { configMap, line: `release signatures: ${gathered.signatures.length} from ${dir} verified with ${gathered.verifiedWith.join(', ')}` };
}
