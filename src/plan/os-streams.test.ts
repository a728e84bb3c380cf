import { describe, expect, it } from 'vitest';
import type { ComponentImage } from '../release/image-references.js';
import type { ManifestDocument } from '../release/documents.js';
import type { Classification } from './classify.js';
import { chooseStreams, classifyOsImages, isNodeOsImage, osImagesOf, type StreamInputs } from './os-streams.js';

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const component = (n: number, name: string, source = 'https://github.com/openshift/os'): ComponentImage => ({ name, names: [name], pullSpec: `quay.io/o/art@${digest(n)}`, digest: digest(n), annotations: { 'io.openshift.build.source-location': source } });
const components = [component(1, 'rhel-coreos'), component(2, 'rhel-coreos-extensions'), component(3, 'rhel-coreos-10'), component(4, 'rhel-coreos-10-extensions'), component(5, 'etcd', 'https://github.com/openshift/etcd')];
/** As the 2026 images label themselves (MCO pkg/osimagestream reads io.openshift.os.streamclass). */
const labels = new Map<string, Record<string, string>>([
  [digest(1), { 'io.openshift.os.streamclass': 'rhel-9', 'containers.bootc': '1' }],
  [digest(2), { 'io.openshift.os.streamclass': 'rhel-9', 'io.openshift.os.extensions': 'true' }],
  [digest(3), { 'io.openshift.os.streamclass': 'rhel-10', 'containers.bootc': '1' }],
  [digest(4), { 'io.openshift.os.streamclass': 'rhel-10', 'io.openshift.os.extensions': 'true' }],
]);
const osImageUrl: ManifestDocument = {
  file: '0000_80_machine-config_05_osimageurl.yaml',
  doc: { kind: 'ConfigMap', metadata: { name: 'machine-config-osimageurl' }, data: { baseOSContainerImage: `quay.io/o/art@${digest(1)}`, baseOSExtensionsContainerImage: `quay.io/o/art@${digest(2)}` } },
};
const offline: StreamInputs = { requested: [], major: 5, mco: true, profile: 'self-managed-high-availability' };
const images = osImagesOf(components, labels);

describe('node OS streams', () => {
  it('finds OS images by MCO\'s tag rule or their openshift/os source, and names streams by label', () => {
    expect(components.map(isNodeOsImage)).toEqual([true, true, true, true, false]);
    expect(images.map((i) => [i.component.name, i.stream, i.extensions])).toEqual([
      ['rhel-coreos', 'rhel-9', false], ['rhel-coreos-extensions', 'rhel-9', true], ['rhel-coreos-10', 'rhel-10', false], ['rhel-coreos-10-extensions', 'rhel-10', true],
    ]);
    expect(osImagesOf(components, new Map()).map((i) => i.stream)).toEqual(['rhel-coreos', 'rhel-coreos', 'rhel-coreos-10', 'rhel-coreos-10']);
  });
  it('offline: the stream the release\'s osimageurl names, plus --os-stream', () => {
    expect(chooseStreams(images, [osImageUrl], offline)).toMatchObject({ available: ['rhel-10', 'rhel-9'], pinned: ['rhel-9'] });
    expect(chooseStreams(images, [osImageUrl], offline).why).toMatch(/^rhel-9: the release's default \(machine-config-osimageurl baseOSContainerImage is rhel-coreos\)/);
    expect(chooseStreams(images, [osImageUrl], { ...offline, requested: ['rhel-10'] }).pinned).toEqual(['rhel-10', 'rhel-9']);
    // Without the ConfigMap: MCO's built-in default for the major version.
    expect(chooseStreams(images, [], offline).pinned).toEqual(['rhel-10']);
    expect(chooseStreams(images, [], { ...offline, major: 4 }).pinned).toEqual(['rhel-9']);
  });
  it('live: each pool\'s stream on its nodes (the master pool\'s are control-plane), the default for pools that name none', () => {
    const live = chooseStreams(images, [osImageUrl], { ...offline, live: { defaultStream: 'rhel-9', pools: [{ pool: 'master' }, { pool: 'worker', stream: 'rhel-10' }] } });
    expect(live.pinned).toEqual(['rhel-10', 'rhel-9']);
    expect(live.roles).toEqual({ 'rhel-10': 'worker', 'rhel-9': 'control-plane' });
    expect(live.why).toBe('rhel-10: pool worker; rhel-9: pool master (the cluster\'s default (OSImageStream cluster))');
    const classifications = new Map<string, Classification>();
    classifyOsImages(images, live, classifications);
    expect([...classifications.values()].map((c) => c.role)).toEqual(['control-plane', 'control-plane', 'worker', 'worker']);
    // A second worker pool on the default: rhel-9 then goes to every node.
    expect(chooseStreams(images, [osImageUrl], { ...offline, live: { defaultStream: 'rhel-9', pools: [{ pool: 'master' }, { pool: 'worker', stream: 'rhel-10' }, { pool: 'infra' }] } }).roles).toEqual({ 'rhel-10': 'worker', 'rhel-9': 'all' });
    // A cluster that serves no pools (or no OSImageStream): the release's default everywhere.
    expect(chooseStreams(images, [osImageUrl], { ...offline, live: { pools: [] } })).toMatchObject({ pinned: ['rhel-9'], roles: { 'rhel-9': 'all' } });
  });
  it('no OS image under a profile without the machine-config operator', () => {
    const choice = chooseStreams(images, [osImageUrl], { ...offline, mco: false, profile: 'ibm-cloud-managed' });
    expect(choice.pinned).toEqual([]);
    const classifications = new Map<string, Classification>();
    classifyOsImages(images, choice, classifications);
    expect([...classifications.values()].every((c) => c.role === 'none')).toBe(true);
    expect(classifications.get(digest(1))!.evidence[0]).toMatch(/profile ibm-cloud-managed runs no machine-config operator/);
  });
  it('pins the chosen streams on every node and says how to add the others', () => {
    const classifications = new Map<string, Classification>();
    classifyOsImages(images, chooseStreams(images, [osImageUrl], offline), classifications);
    expect(classifications.get(digest(2))!.role).toBe('all');
    expect(classifications.get(digest(3))!.role).toBe('none');
    expect(classifications.get(digest(3))!.evidence[0]).toMatch(/node OS image of stream rhel-10, which no node boots .*; --os-stream rhel-10 pins it$/);
  });
  it('refuses a stream the release does not carry, listing its streams', () => {
    expect(() => chooseStreams(images, [osImageUrl], { ...offline, requested: ['rhel-11'] })).toThrow('--os-stream rhel-11 is not a node OS stream of this release; it carries rhel-10, rhel-9');
  });
});
