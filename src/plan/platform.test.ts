import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { parsePlatform, platformsInName, platformsOfComponent } from './platform.js';

describe('platformsInName', () => {
  it('finds platform words in env vars, images.json keys and component names', () => {
    expect(platformsInName('AWS_EBS_DRIVER_IMAGE')).toEqual(['AWS']);
    expect(platformsInName('cloudControllerManagerOpenStack')).toEqual(['OpenStack']);
    expect(platformsInName('VMWARE_VSPHERE_DRIVER_IMAGE')).toEqual(['VSphere']);
    expect(platformsInName('MANILA_NFS_DRIVER_IMAGE')).toEqual(['OpenStack']);
    expect(platformsInName('clusterAPIControllerIBMCloud')).toEqual(['IBMCloud']);
    expect(platformsInName('ibm-powervs-block-csi-driver')).toEqual(['PowerVS']);
    expect(platformsInName('baremetalIronic')).toEqual(['BareMetal']);
  });
  it('does not take the ibm-cloud-managed profile or generic names for a platform', () => {
    expect(platformsInName('0000_70_cluster-network-operator_03_deployment-ibm-cloud-managed.yaml')).toEqual([]);
    expect(platformsInName('OVN_IMAGE')).toEqual([]);
    expect(platformsInName('kube-rbac-proxy')).toEqual([]);
  });
});

describe('platformsOfComponent', () => {
  it('knows components whose names carry no platform', () => {
    expect(platformsOfComponent(['cloud-network-config-controller'])!.platforms).toEqual(['AWS', 'Azure', 'GCP', 'OpenStack']);
    expect(platformsOfComponent(['baremetal-runtimecfg'])!.why).toMatch(/on-premises/);
    expect(platformsOfComponent(['gcp-pd-csi-driver'])).toEqual({ platforms: ['GCP'], why: 'component name gcp-pd-csi-driver' });
    expect(platformsOfComponent(['coredns'])).toBeUndefined();
  });
});

describe('parsePlatform', () => {
  it('accepts Infrastructure names case-insensitively and lists them otherwise', () => {
    expect(parsePlatform('aws')).toBe('AWS');
    expect(parsePlatform('BareMetal')).toBe('BareMetal');
    expect(() => parsePlatform('Hetzner')).toThrow(BadInputError);
    expect(() => parsePlatform('Hetzner')).toThrow(/--platform Hetzner is not a platform; use one of AWS, Azure, GCP, VSphere, BareMetal/);
  });
});
