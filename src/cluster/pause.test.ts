import { describe, expect, it } from 'vitest';
import { PAUSED_ANNOTATION, PAUSED_ROLE_ANNOTATION } from '../api/staging.js';
import { BadInputError } from '../errors.js';
import { pauseSteps, pauseTime, resumeSteps, type SetMeta } from './pause.js';
import { poolsSelecting, type PoolSelector } from './mco/backend.js';
import { POOL_ROLE_LABEL } from '../plan/assemble.js';

const NOW = '2026-03-01T02:03:04Z';
const POOLS: PoolSelector[] = [
  { name: 'master', machineConfigSelector: { matchLabels: { [POOL_ROLE_LABEL]: 'master' } } },
  { name: 'worker', machineConfigSelector: { matchLabels: { [POOL_ROLE_LABEL]: 'worker' } } },
  { name: 'infra', machineConfigSelector: { matchExpressions: [{ key: POOL_ROLE_LABEL, operator: 'In', values: ['worker', 'infra'] }] } },
  // A pool without a selector selects nothing.
  { name: 'bare' },
];

const set = (name: string, labels: Record<string, string> = {}, annotations: Record<string, string> = {}): SetMeta => ({ name, resourceVersion: '41', labels: { 'app.kubernetes.io/managed-by': 'prestage', ...labels }, annotations });
const worker = (annotations: Record<string, string> = {}) => set('prestage-4.16.3-worker', { [POOL_ROLE_LABEL]: 'worker' }, annotations);

function badInput(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(BadInputError);
    expect((error as Error).message).not.toContain('\n');
    return (error as Error).message;
  }
  throw new Error('expected a BadInputError');
}

it('pauseTime is RFC 3339 UTC to the second', () => {
  expect(pauseTime(new Date('2026-03-01T02:03:04.567Z'))).toBe(NOW);
});

it('poolsSelecting: by machineConfigSelector, sorted; a pool without one selects nothing', () => {
  expect(poolsSelecting({ [POOL_ROLE_LABEL]: 'worker' }, POOLS)).toEqual(['infra', 'worker']);
  expect(poolsSelecting({}, POOLS)).toEqual([]);
});

describe('agent backend', () => {
  it('pause adds the annotation (no precondition: nothing on the set but the annotation changes); a paused set is already paused', () => {
    const steps = pauseSteps('agent', [set('a'), set('b', {}, { [PAUSED_ANNOTATION]: '2026-02-01T00:00:00Z' })], NOW);
    expect(steps).toEqual([
      { set: 'a', action: 'pause', patch: { metadata: { annotations: { [PAUSED_ANNOTATION]: NOW } } } },
      { set: 'b', action: 'already', since: '2026-02-01T00:00:00Z' },
    ]);
  });

  it('resume removes the annotation; a named set not paused refuses them all; without names only the paused are resumed', () => {
    const paused = set('a', {}, { [PAUSED_ANNOTATION]: NOW });
    expect(resumeSteps('agent', [paused], true)).toEqual([{ set: 'a', patch: { metadata: { annotations: { [PAUSED_ANNOTATION]: null } } } }]);
    expect(badInput(() => resumeSteps('agent', [paused, set('b')], true))).toBe(`b is not paused (no annotation ${PAUSED_ANNOTATION}); nothing changed`);
    expect(resumeSteps('agent', [paused, set('b')], false).map((s) => s.set)).toEqual(['a']);
    expect(badInput(() => resumeSteps('agent', [set('b')], false))).toMatch(/^no paused sets /);
    expect(badInput(() => resumeSteps('agent', [], false))).toMatch(/^no paused sets /);
  });
});

describe('MCO backend', () => {
  it('pause moves the role label into the annotation in one patch conditional on the resourceVersion', () => {
    expect(pauseSteps('mco', [worker()], NOW, POOLS)).toEqual([
      {
        set: 'prestage-4.16.3-worker',
        action: 'pause',
        role: 'worker',
        unselectedBy: ['infra', 'worker'],
        patch: { metadata: { resourceVersion: '41', labels: { [POOL_ROLE_LABEL]: null }, annotations: { [PAUSED_ANNOTATION]: NOW, [PAUSED_ROLE_ANNOTATION]: 'worker' } } },
      },
    ]);
  });

  it('a paused set is already paused; one that got its label back (applied again) is paused again', () => {
    const paused = set('p', {}, { [PAUSED_ANNOTATION]: '2026-02-01T00:00:00Z', [PAUSED_ROLE_ANNOTATION]: 'worker' });
    expect(pauseSteps('mco', [paused], NOW, POOLS)).toEqual([{ set: 'p', action: 'already', since: '2026-02-01T00:00:00Z' }]);
    const reapplied = worker({ [PAUSED_ANNOTATION]: '2026-02-01T00:00:00Z', [PAUSED_ROLE_ANNOTATION]: 'worker' });
    expect(pauseSteps('mco', [reapplied], NOW, POOLS)[0]).toMatchObject({ action: 'pause', role: 'worker' });
  });

  it('refuses, before any change and in one line, a set without a role label and one a pool selects by other labels', () => {
    const other = set('other', { [POOL_ROLE_LABEL]: 'worker', tier: 'edge' });
    const pools = [...POOLS, { name: 'edge', machineConfigSelector: { matchLabels: { tier: 'edge' } } }];
    const message = badInput(() => pauseSteps('mco', [set('bare'), other, worker()], NOW, pools));
    expect(message).toBe(
      `cannot pause bare has no label ${POOL_ROLE_LABEL} to move aside and restore on resume (MCO pools select sets by it); other is selected by pool edge without its ${POOL_ROLE_LABEL} label (spec.machineConfigSelector), so moving the label aside would not stop MCO pulling it; nothing changed`,
    );
  });

  it('resume restores the label from the annotation and removes both annotations in one patch', () => {
    const paused = set('prestage-4.16.3-worker', {}, { [PAUSED_ANNOTATION]: NOW, [PAUSED_ROLE_ANNOTATION]: 'worker' });
    expect(resumeSteps('mco', [paused], true, POOLS)).toEqual([
      {
        set: 'prestage-4.16.3-worker',
        role: 'worker',
        restored: true,
        selectedBy: ['infra', 'worker'],
        patch: { metadata: { resourceVersion: '41', labels: { [POOL_ROLE_LABEL]: 'worker' }, annotations: { [PAUSED_ANNOTATION]: null, [PAUSED_ROLE_ANNOTATION]: null } } },
      },
    ]);
  });

  it('resume keeps a label set since the pause, and refuses a paused set with no role to restore', () => {
    const reapplied = set('r', { [POOL_ROLE_LABEL]: 'master' }, { [PAUSED_ANNOTATION]: NOW, [PAUSED_ROLE_ANNOTATION]: 'worker' });
    expect(resumeSteps('mco', [reapplied], true, POOLS)[0]).toMatchObject({ role: 'master', restored: false, selectedBy: ['master'], patch: { metadata: { annotations: { [PAUSED_ANNOTATION]: null, [PAUSED_ROLE_ANNOTATION]: null } } } });
    expect(resumeSteps('mco', [reapplied], true, POOLS)[0]!.patch.metadata).not.toHaveProperty('labels');
    const lost = set('lost', {}, { [PAUSED_ANNOTATION]: NOW });
    expect(badInput(() => resumeSteps('mco', [lost], true, POOLS))).toMatch(/^cannot resume lost: no annotation prestage\.dev\/paused-role or label machineconfiguration\.openshift\.io\/role says which pools select it; .*nothing changed$/);
  });
});
