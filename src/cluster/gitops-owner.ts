/**
 * Which GitOps controller manages an object, from the marks each leaves on what it applies:
 * Argo CD's tracking annotation (annotation tracking) or its tracking label (label tracking,
 * `app.kubernetes.io/instance` by default), Flux's kustomize-controller and helm-controller labels.
 * Deleting such an object by hand fights the controller: it applies it again (or prunes it itself).
 */
export interface GitOpsOwner {
  /** `Argo CD application NAME` or `Flux Kustomization NS/NAME`. */
  readonly controller: string;
  /** What to do instead of deleting it. */
  readonly instead: string;
}

export function gitopsOwnerOf(metadata: { labels?: Readonly<Record<string, string>>; annotations?: Readonly<Record<string, string>> }): GitOpsOwner | undefined {
  const labels = metadata.labels ?? {};
  const annotations = metadata.annotations ?? {};
  const argoApp = annotations['argocd.argoproj.io/tracking-id']?.split(':')[0] ?? labels['argocd.argoproj.io/instance'] ?? labels['app.kubernetes.io/instance'];
  if (argoApp) return { controller: `Argo CD application ${argoApp}`, instead: 'remove the set from the repository and let Argo CD prune it' };
  const flux = labels['kustomize.toolkit.fluxcd.io/name'];
  if (flux) return { controller: `Flux Kustomization ${labels['kustomize.toolkit.fluxcd.io/namespace'] ?? 'flux-system'}/${flux}`, instead: 'remove the set from the repository (with prune: true, Flux deletes it)' };
  const helm = labels['helm.toolkit.fluxcd.io/name'];
  if (helm) return { controller: `Flux HelmRelease ${labels['helm.toolkit.fluxcd.io/namespace'] ?? 'flux-system'}/${helm}`, instead: 'remove the set from the chart values' };
  return undefined;
}
