/** The planning flags, shared by every command that plans a release (plan, bundle, apply, stage). */
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import { readImagesFile, type PlanOptions } from '../plan/build.js';
import { DEFAULT_PROFILE } from '../plan/inclusion.js';
import { parsePlatform, PLATFORMS } from '../plan/platform.js';
import type { LiveCluster } from '../plan/live.js';
import type { ImageRole } from '../plan/types.js';
import type { CatalogSelection } from '../catalog/selection.js';
import { parsePackageFlag } from '../catalog/package-flag.js';
import { readImageSetConfiguration, type ImageSetConfiguration } from '../config/image-set-config.js';

export interface PlanFlags {
  arch: string;
  profile: string;
  'feature-set'?: string;
  'feature-gates': string[];
  'os-stream': string[];
  'capability-set'?: string;
  capabilities: string[];
  exclude: string[];
  platform?: string;
  'control-plane-only': string[];
  'all-nodes': string[];
  image: string[];
  'images-file'?: string;
  'extra-role': ImageRole;
  'name-prefix': string;
  config?: string;
  catalog?: string;
  package: string[];
}

/** Repeatable flags that also take comma lists (`--capabilities Build,Console`). */
const list = (values: readonly string[]): string[] => values.flatMap((v) => String(v).split(',')).map((v) => v.trim()).filter(Boolean);

export function withPlanOptions<T>(y: Argv<T>): Argv<T & PlanFlags> {
  return y
    .option('arch', { type: 'string', default: 'amd64', describe: 'Architecture to plan for (amd64, arm64, ppc64le, s390x)' })
    .option('profile', { type: 'string', default: DEFAULT_PROFILE, describe: 'Cluster profile for manifest inclusion' })
    .option('feature-set', { type: 'string', describe: 'Cluster feature set for manifest inclusion: Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade, OKD (4.22+) (default: the live cluster\'s, else Default)' })
    .option('feature-gates', { type: 'string', array: true, default: [] as string[], describe: 'Feature gates over Default\'s, as CustomNoUpgrade sets them: NAME enables, -NAME disables (repeatable or comma list; a list that starts with -NAME is given as --feature-gates=-NAME; 4.22+ releases decide inclusion by gates)' })
    .option('capability-set', { type: 'string', describe: 'Baseline capability set, as install-config names it: None, v4.11 ... the newest the release knows, vCurrent (default: the live cluster\'s, else vCurrent)' })
    .option('capabilities', { type: 'string', array: true, default: [] as string[], describe: 'Additional enabled capability NAME (repeatable or comma list)' })
    .option('exclude', { type: 'string', array: true, default: [] as string[], describe: 'Leave out manifests annotated exclude.release.openshift.io/X: "true" (as the CVO\'s EXCLUDE_MANIFESTS)' })
    .option('os-stream', { type: 'string', array: true, default: [] as string[], describe: 'Node OS stream to pin besides the one the nodes boot by default (e.g. rhel-10; repeatable; the plan lists the release\'s streams)' })
    .option('platform', { type: 'string', describe: `Infrastructure platform (${PLATFORMS.join(', ')}; default: the live cluster's, else unknown, which keeps every platform's images)` })
    .option('control-plane-only', { type: 'string', array: true, default: [] as string[], describe: 'Component NAME to pin on control-plane nodes only (repeatable)' })
    .option('all-nodes', { type: 'string', array: true, default: [] as string[], describe: 'Component NAME to pin on all nodes (repeatable)' })
    .option('image', { type: 'string', array: true, default: [] as string[], describe: 'Extra image REF to add (repeatable; tags resolved to digests)' })
    .option('images-file', { type: 'string', describe: 'File with extra image references, one per line' })
    .option('extra-role', { choices: ['all', 'worker', 'control-plane'] as const, default: 'all' as const, describe: 'Which nodes get the extra images' })
    .option('name-prefix', { type: 'string', default: 'prestage', describe: 'Prefix of the PinnedImageSet names' })
    .option('config', { type: 'string', describe: "oc-mirror v2 ImageSetConfiguration FILE (mirror.openshift.io/v2alpha1): its mirror.operators (catalogs, packages, channels, version ranges) and mirror.additionalImages are staged beside the release, with each selected bundle's dependencies" })
    .option('catalog', { type: 'string', describe: 'Operator catalog image REF (file-based, e.g. registry.redhat.io/redhat/redhat-operator-index:v4.16) to stage --package operators from; alone: the head of every channel of every package' })
    .option('package', { type: 'string', array: true, default: [] as string[], describe: 'With --catalog: operator NAME[/CHANNEL][@RANGE] to stage (repeatable); RANGE is V (exactly), MIN..MAX, MIN.. or ..MAX (inclusive); no channel: every channel\'s; no range: the channel heads' }) as unknown as Argv<T & PlanFlags>;
}

/** `--cluster`/`--no-cluster`: plan the upgrade of the running cluster (live.ts), or from the release alone. */
export interface LiveFlags {
  cluster?: boolean;
}

export function withLiveOptions<T>(y: Argv<T>, byDefault: string): Argv<T & LiveFlags> {
  return y.option('cluster', {
    type: 'boolean',
    describe: `Plan what each role of the running cluster needs after the upgrade: ClusterVersion, Infrastructure, Nodes and Pods, read-only (default: ${byDefault}; --no-cluster plans from the release alone)`,
  }) as unknown as Argv<T & LiveFlags>;
}

const lifecycle = () => import('../cluster/release-lifecycle.js');

/** The release to plan: the RELEASE pullspec, or `--to VERSION`, an update the cluster offers. */
export interface ToFlags {
  release?: string;
  to?: string;
  'allow-not-recommended': boolean;
  kubeconfig?: string;
  context?: string;
}

/** `what`: how a value that is no version reads (bundle create's --to was once its directory). */
export function withToOptions<T>(y: Argv<T>, notAVersion?: (value: string) => string, positional = 'release', neitherMeans?: string): Argv<T & ToFlags> {
  return y
    .option('to', {
      type: 'string',
      // The release lifecycle (semver, the cluster API) loads only when --to is given. yargs
      // awaits a coerce; a failure becomes a YError, as yargs makes of a synchronous one.
      coerce: async (value: string | undefined) => {
        const { parseReleaseVersion } = await lifecycle();
        try {
          return parseReleaseVersion('--to')(value);
        } catch (err) {
          throw Object.assign(new Error(notAVersion && value !== undefined ? notAVersion(value) : (err as Error).message), { name: 'YError' });
        }
      },
      describe: 'Release VERSION instead of RELEASE: an update the cluster offers (ClusterVersion status.availableUpdates), resolved to its pullspec as oc adm upgrade --to does',
    })
    .option('allow-not-recommended', { type: 'boolean', default: false, describe: 'With --to: accept a conditional update the cluster does not recommend (its risks are printed)' })
    .check((argv) => {
      // An ImageSetConfiguration's mirror.platform.channels may name the path instead (path-options.ts).
      if (argv[positional] === undefined && argv['to'] === undefined && argv['config'] !== undefined) return true;
      // A command for which naming neither has a meaning of its own (preflight: the sets on the cluster).
      if (neitherMeans !== undefined && argv[positional] === undefined && argv['to'] === undefined) return true;
      if ((argv[positional] === undefined) === (argv['to'] === undefined)) throw new BadInputError(`name the release as the ${positional.toUpperCase()} argument or as --to VERSION, exactly one of them`);
      return true;
    }) as unknown as Argv<T & ToFlags>;
}

/** The pullspec to plan; `--to` reads ClusterVersion, and `warn`s each risk of a conditional update accepted. */
export async function releaseToPlan(flags: ToFlags, warn: (line: string) => void): Promise<string> {
  if (flags.to === undefined) return flags.release!;
  const [{ connectCluster }, { readClusterVersion }, { resolveUpdate, riskLines }] = await Promise.all([
    import('../cluster/connect.js'),
    import('../cluster/live-cluster.js'),
    lifecycle(),
  ]);
  const client = await connectCluster(flags);
  const update = resolveUpdate(await readClusterVersion(client, '--to'), flags.to, flags['allow-not-recommended']);
  for (const line of riskLines(update)) warn(line);
  return update.pullSpec;
}

export function planOptionsFrom(flags: PlanFlags, release: string, live?: LiveCluster): PlanOptions {
  const config = flags.config !== undefined ? readImageSetConfiguration(flags.config) : undefined;
  const operators = operatorSelections(flags, config);
  return {
    release,
    arch: flags.arch,
    profile: flags.profile,
    ...(flags['feature-set'] !== undefined ? { featureSet: flags['feature-set'].trim() || 'Default' } : {}),
    featureGates: list(flags['feature-gates']),
    osStreams: list(flags['os-stream']),
    ...(flags['capability-set'] !== undefined ? { capabilitySet: flags['capability-set'] } : {}),
    ...(live ? { live } : {}),
    additionalCapabilities: list(flags.capabilities),
    exclude: list(flags.exclude),
    ...(flags.platform !== undefined ? { platform: parsePlatform(flags.platform) } : {}),
    controlPlaneOnly: list(flags['control-plane-only']),
    allNodes: list(flags['all-nodes']),
    extraImages: [...flags.image, ...(flags['images-file'] ? readImagesFile(flags['images-file']) : []), ...(config?.additionalImages ?? [])],
    extraRole: flags['extra-role'],
    namePrefix: flags['name-prefix'],
    ...(operators.length > 0 ? { operators } : {}),
    ...(config ? { inputWarnings: configWarnings(flags.config!, config, namesRelease(flags)) } : {}),
  };
}

/** The operators to stage: the config's catalogs, then `--catalog` with its `--package`s. */
function operatorSelections(flags: PlanFlags, config: ImageSetConfiguration | undefined): CatalogSelection[] {
  if (flags.package.length > 0 && flags.catalog === undefined) throw new BadInputError('--package needs --catalog REF: the catalog image to stage the operator from');
  const fromFlags: CatalogSelection[] = flags.catalog !== undefined ? [{ catalog: flags.catalog, full: false, packages: flags.package.map(parsePackageFlag) }] : [];
  return [...(config?.operators ?? []), ...fromFlags];
}

/** Whether the command line named the release (SOURCE, RELEASE or --to), not the config's channels. */
function namesRelease(flags: PlanFlags): boolean {
  const named = flags as PlanFlags & { to?: string; release?: string; source?: string };
  return named.to !== undefined || named.release !== undefined || named.source !== undefined;
}

/** What the config asks that a plan does not do, said once. */
function configWarnings(file: string, config: ImageSetConfiguration, namedRelease: boolean): string[] {
  return [
    ...(config.platform && config.platform.channels.length > 0 && namedRelease ? [`--config ${file}: mirror.platform.channels are not planned (the release is the one named on the command line)`] : []),
    ...(config.blockedImages.length > 0 ? [`--config ${file}: mirror.blockedImages are not applied to a plan`] : []),
    ...config.ignored.map((path) => `--config ${file}: ${path} is accepted and not used by prestage`),
  ];
}
