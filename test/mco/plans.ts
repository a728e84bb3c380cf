/** Small plans for cluster tests: a control-plane and a worker set of made-up digest pullspecs. */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PLAN_API_VERSION, type Plan, type PlannedSet, type SetRole } from '../../src/plan/types.js';

export function digestPullSpec(seed: string): string {
  return `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${createHash('sha256').update(seed).digest('hex')}`;
}

function plannedSet(prefix: string, role: SetRole, images: readonly string[], diskBytes: number): PlannedSet {
  return {
    name: `${prefix}-${role}`,
    role,
    labels: { 'machineconfiguration.openshift.io/role': role === 'control-plane' ? 'master' : 'worker' },
    images: [...images].sort(),
    compressedBytes: Math.round(diskBytes / 2),
    diskBytes,
    estimate: { method: 'exact', exactLayers: images.length, estimatedLayers: 0 },
  };
}

/** Sets `<prefix>-control-plane` and `<prefix>-worker`, `imageCount` images each. */
export function testPlan(prefix: string, options: { imageCount?: number; diskBytes?: number; seed?: string } = {}): Plan {
  const count = options.imageCount ?? 3;
  const images = Array.from({ length: count }, (_, i) => digestPullSpec(`${options.seed ?? prefix}-${i}`));
  const diskBytes = options.diskBytes ?? 64 * 2 ** 20;
  return {
    apiVersion: PLAN_API_VERSION,
    kind: 'Plan',
    release: {
      pullSpec: digestPullSpec('release'),
      digest: `sha256:${createHash('sha256').update('release').digest('hex')}`,
      manifestDigest: `sha256:${createHash('sha256').update('release').digest('hex')}`,
      version: '4.16.3',
      architecture: 'amd64',
      multiArch: false,
      channels: ['stable-4.16'],
    },
    profile: 'self-managed-high-availability',
    cluster: { profile: 'self-managed-high-availability', featureSet: 'Default', capabilities: [], exclude: [], platform: null },
    images: [],
    skipped: [],
    sets: [plannedSet(prefix, 'control-plane', images, diskBytes), plannedSet(prefix, 'worker', images.slice(0, Math.max(1, count - 1)), diskBytes)],
    warnings: [],
  };
}

export function writePlan(dir: string, plan: Plan): string {
  const file = join(dir, `${plan.sets[0]!.name}.plan.json`);
  writeFileSync(file, JSON.stringify(plan, null, 2));
  return file;
}
