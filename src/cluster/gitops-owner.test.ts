import { describe, expect, it } from 'vitest';
import { gitopsOwnerOf } from './gitops-owner.js';

describe('gitopsOwnerOf', () => {
  it("names Argo CD's application from its tracking annotation or label", () => {
    expect(gitopsOwnerOf({ annotations: { 'argocd.argoproj.io/tracking-id': 'stage:prestage.dev/PinnedImageSet:/prestage-4.16.3-worker' } })?.controller).toBe('Argo CD application stage');
    expect(gitopsOwnerOf({ labels: { 'app.kubernetes.io/instance': 'stage' } })?.controller).toBe('Argo CD application stage');
  });

  it("names Flux's Kustomization and HelmRelease from their labels", () => {
    expect(gitopsOwnerOf({ labels: { 'kustomize.toolkit.fluxcd.io/name': 'prestage-sets', 'kustomize.toolkit.fluxcd.io/namespace': 'flux-system' } })).toEqual({
      controller: 'Flux Kustomization flux-system/prestage-sets',
      instead: 'remove the set from the repository (with prune: true, Flux deletes it)',
    });
    expect(gitopsOwnerOf({ labels: { 'helm.toolkit.fluxcd.io/name': 'p', 'helm.toolkit.fluxcd.io/namespace': 'apps' } })?.controller).toBe('Flux HelmRelease apps/p');
  });

  it("finds none on prestage's own labels", () => {
    expect(gitopsOwnerOf({ labels: { 'app.kubernetes.io/managed-by': 'prestage', 'prestage.dev/release-version': '4.16.3' }, annotations: {} })).toBeUndefined();
  });
});
