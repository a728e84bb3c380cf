/**
 * OpenShift's own CRDs, loaded as they ship in the Go module github.com/openshift/api (fetched
 * and cached by scripts/build-testbed.sh; FACTS §3), never re-typed by hand:
 * - `OPENSHIFT_4_21`: machineconfiguration.openshift.io/v1 PinnedImageSet, MachineConfigNode
 *   (SelfManagedHA, Default) and MachineConfigPool (Default), the GA API of 4.19+;
 * - `OPENSHIFT_4_16`: PinnedImageSet and MachineConfigNode at v1alpha1, served only under
 *   TechPreviewNoUpgrade, beside that feature set's MachineConfigPool;
 * - `OPENSHIFT_5_0`: openshift/api main (Aug 2026): v1 PinnedImageSet, MachineConfigNode, the
 *   MachineConfigPool that names an OS stream (`spec.osImageStream`) and OSImageStream;
 * plus each release's ClusterVersion, Infrastructure, FeatureGate, Image and ImageDigestMirrorSet (config.openshift.io/v1, Default).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import type { KubeClient } from '../../src/kube/client.js';
import { testbedBinaries } from '../cluster/binaries.js';

export interface OpenShiftRelease {
  /** Key of the module version in scripts/build-testbed.sh's OPENSHIFT_API. */
  readonly module: 'release-4.16' | 'release-4.21' | 'main';
  /** Files under the module's CRD folders, relative to `<folder>/zz_generated.crd-manifests/`. */
  readonly mco: readonly string[];
  readonly config: readonly string[];
}

const CONFIG_DEFAULT = [
  'config/v1/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml',
  'config/v1/0000_10_config-operator_01_infrastructures-Default.crd.yaml',
  // The cluster's feature set and enabled gates per version (what the CVO decides inclusion with, 4.22+).
  'config/v1/0000_10_config-operator_01_featuregates.crd.yaml',
  // Where `install --cache` wires nodes to the cache on OpenShift: the cluster Image config and ImageDigestMirrorSets.
  'config/v1/0000_10_config-operator_01_images.crd.yaml',
  'config/v1/0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml',
];

export const OPENSHIFT_4_21: OpenShiftRelease = {
  module: 'release-4.21',
  mco: [
    'machineconfiguration/v1/0000_80_machine-config_01_pinnedimagesets.crd.yaml',
    'machineconfiguration/v1/0000_80_machine-config_01_machineconfignodes-SelfManagedHA-Default.crd.yaml',
    'machineconfiguration/v1/0000_80_machine-config_01_machineconfigpools-Default.crd.yaml',
  ],
  config: CONFIG_DEFAULT,
};

export const OPENSHIFT_4_16: OpenShiftRelease = {
  module: 'release-4.16',
  mco: [
    'machineconfiguration/v1alpha1/0000_80_machine-config_01_pinnedimagesets-TechPreviewNoUpgrade.crd.yaml',
    'machineconfiguration/v1alpha1/0000_80_machine-config_01_machineconfignodes-TechPreviewNoUpgrade.crd.yaml',
    'machineconfiguration/v1/0000_80_machine-config_01_machineconfigpools-TechPreviewNoUpgrade.crd.yaml',
  ],
  config: CONFIG_DEFAULT,
};

export const OPENSHIFT_5_0: OpenShiftRelease = {
  module: 'main',
  mco: [
    'machineconfiguration/v1/0000_80_machine-config_01_pinnedimagesets.crd.yaml',
    'machineconfiguration/v1/0000_80_machine-config_01_machineconfignodes-SelfManagedHA-Default.crd.yaml',
    'machineconfiguration/v1/0000_80_machine-config_01_machineconfigpools-SelfManagedHA.crd.yaml',
    'machineconfiguration/v1/0000_80_machine-config_01_osimagestreams-SelfManagedHA.crd.yaml',
  ],
  config: CONFIG_DEFAULT,
};

/** The payload's FeatureGate manifests as openshift/api main ships them (`payload-manifests/featuregates/`), by file name. */
export async function payloadFeatureGateFiles(): Promise<Map<string, string>> {
  const root = join((await testbedBinaries()).openshiftApi.main, 'payload-manifests/featuregates');
  return new Map(readdirSync(root).sort().map((file) => [file, readFileSync(join(root, file), 'utf8')]));
}

interface Crd {
  metadata: { name: string };
  spec: { group: string; names: { plural: string }; versions: Array<{ name: string; served: boolean }> };
}

/** The CRD documents of a release, read from the cached module. */
export async function openshiftCrds(release: OpenShiftRelease, which: 'mco' | 'config' | 'all' = 'mco'): Promise<Crd[]> {
  const root = (await testbedBinaries()).openshiftApi[release.module];
  const files = which === 'all' ? [...release.mco, ...release.config] : release[which];
  return files.map((file) => load(readFileSync(join(root, file), 'utf8')) as Crd);
}

/** Creates a release's CRDs and resolves once the API server serves every one at its versions. */
export async function installOpenShiftCrds(client: KubeClient, release: OpenShiftRelease = OPENSHIFT_4_21, which: 'mco' | 'config' | 'all' = 'mco'): Promise<void> {
  const crds = await openshiftCrds(release, which);
  for (const definition of crds) {
    await client.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: definition });
  }
  const wanted = crds.flatMap((d) => d.spec.versions.filter((v) => v.served).map((v) => ({ path: `/apis/${d.spec.group}/${v.name}`, plural: d.spec.names.plural })));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const served = await Promise.all(wanted.map(async ({ path, plural }) => (await client.find<{ resources: Array<{ name: string }> }>(path))?.resources.some((r) => r.name === plural) ?? false));
    if (served.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error(`OpenShift ${release.module} CRDs were not served within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The MCO CRDs of OpenShift 4.21 (v1), or of another release. */
export const installMcoCrds = (client: KubeClient, release: OpenShiftRelease = OPENSHIFT_4_21): Promise<void> => installOpenShiftCrds(client, release, 'mco');
