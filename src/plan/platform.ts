/**
 * Which infrastructure platforms an image serves, derived from the release itself: the name
 * under which a manifest references it (env var, `images.json` key, `--images=` arg), then the
 * referencing manifest (file and object name), and only then the component name. One table,
 * so every decision can name the words it matched.
 */
import { BadInputError } from '../errors.js';

/** `Infrastructure.status.platformStatus.type` values (openshift/api config/v1). */
export const PLATFORMS = [
  'AWS', 'Azure', 'GCP', 'VSphere', 'BareMetal', 'OpenStack', 'Nutanix', 'IBMCloud', 'PowerVS',
  'AlibabaCloud', 'oVirt', 'KubeVirt', 'Libvirt', 'External', 'None',
] as const;
export type Platform = (typeof PLATFORMS)[number];

/**
 * Words that name a platform inside env var names, ConfigMap keys, manifest and component
 * names. Matched inside lowercased alphanumeric runs, so `cloudControllerManagerOpenStack`,
 * `OPENSTACK_CINDER_DRIVER_IMAGE` and `aws-ebs-csi-driver` all match.
 */
const WORDS: ReadonlyArray<readonly [string, Platform]> = [
  ['aws', 'AWS'],
  ['azure', 'Azure'],
  ['gcp', 'GCP'],
  ['gce', 'GCP'],
  ['vsphere', 'VSphere'],
  ['vmware', 'VSphere'],
  ['baremetal', 'BareMetal'],
  ['ironic', 'BareMetal'],
  ['metal3', 'BareMetal'],
  ['openstack', 'OpenStack'],
  ['cinder', 'OpenStack'],
  ['manila', 'OpenStack'],
  ['nutanix', 'Nutanix'],
  ['powervs', 'PowerVS'],
  ['ibm', 'IBMCloud'],
  ['alibaba', 'AlibabaCloud'],
  ['ovirt', 'oVirt'],
  ['kubevirt', 'KubeVirt'],
  ['libvirt', 'Libvirt'],
];

const ON_PREMISES: readonly Platform[] = ['BareMetal', 'OpenStack', 'VSphere', 'Nutanix', 'oVirt'];

/**
 * Components whose names carry no platform word but that serve a known set of platforms.
 * On-premises platforms run keepalived and runtimecfg static pods for their API and ingress
 * VIPs; cloud-network-config-controller manages egress IPs on the clouds that have an API for it.
 */
const KNOWN_COMPONENTS: Readonly<Record<string, { readonly platforms: readonly Platform[]; readonly why: string }>> = {
  'keepalived-ipfailover': { platforms: ON_PREMISES, why: 'keepalived holds the API and ingress VIPs of on-premises platforms' },
  'baremetal-runtimecfg': { platforms: ON_PREMISES, why: 'runtimecfg renders the VIP configuration of on-premises platforms' },
  'cloud-network-config-controller': { platforms: ['AWS', 'Azure', 'GCP', 'OpenStack'], why: 'it assigns egress IPs through the cloud API of AWS, Azure, GCP and OpenStack' },
};

/** `ibm-cloud-managed` is a profile, not the IBM Cloud platform. */
const NOT_PLATFORM_WORDS = /ibm-cloud-managed/gi;

/** Platforms a name mentions (sorted, deduplicated); empty when it names none. */
export function platformsInName(text: string): Platform[] {
  const runs = text.replace(NOT_PLATFORM_WORDS, ' ').toLowerCase().split(/[^a-z0-9]+/).filter(Boolean);
  const found = new Set<Platform>();
  for (const run of runs) for (const [word, platform] of WORDS) if (run.includes(word)) found.add(platform);
  // "ibm-powervs-..." serves PowerVS, not IBM Cloud.
  if (found.has('PowerVS')) found.delete('IBMCloud');
  return [...found].sort();
}

export interface ComponentPlatforms {
  readonly platforms: readonly Platform[];
  readonly why: string;
}

/** The last resort: the component's tag names. Undefined when they name no platform. */
export function platformsOfComponent(names: readonly string[]): ComponentPlatforms | undefined {
  for (const name of names) {
    const known = KNOWN_COMPONENTS[name];
    if (known) return { platforms: [...known.platforms].sort(), why: `component ${name}: ${known.why}` };
  }
  for (const name of names) {
    const platforms = platformsInName(name);
    if (platforms.length > 0) return { platforms, why: `component name ${name}` };
  }
  return undefined;
}

/** `--platform` as Infrastructure names it, case-insensitively; anything else is bad input. */
export function parsePlatform(text: string): Platform {
  const found = PLATFORMS.find((p) => p.toLowerCase() === text.trim().toLowerCase());
  if (!found) throw new BadInputError(`--platform ${text} is not a platform; use one of ${PLATFORMS.join(', ')} (Infrastructure status.platformStatus.type)`);
  return found;
}
