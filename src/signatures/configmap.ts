/**
 * The ConfigMap a disconnected cluster's CVO reads release signatures from: any in
 * `openshift-config-managed` labelled `release.openshift.io/verification-signatures`, every
 * `binaryData` key that starts with `sha256-<hex>` tried as a signature of that digest.
 */
import yaml from 'js-yaml';

/** Where `bundle push` and `plan --output-dir` write it, beside the ImageDigestMirrorSet and the sets. */
export const SIGNATURE_CONFIGMAP_FILE = 'signature-configmap.yaml';

/** The ConfigMap label the CVO lists signatures by in a disconnected cluster. */
export const SIGNATURES_LABEL = 'release.openshift.io/verification-signatures';
export const SIGNATURES_NAMESPACE = 'openshift-config-managed';

/**
 * The ConfigMap holding a release's signatures for the CVO: `binaryData` keys
 * `sha256-<hex>-1..N`, named `sha256-<hex>` as `oc adm release mirror` names it, so the
 * ConfigMaps of several releases live side by side.
 */
export function signatureConfigMap(digest: string, signatures: readonly Buffer[]): { apiVersion: 'v1'; kind: 'ConfigMap'; metadata: { name: string; namespace: string; labels: Record<string, string> }; binaryData: Record<string, string> } {
  const name = digest.replace(':', '-');
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: SIGNATURES_NAMESPACE, labels: { [SIGNATURES_LABEL]: '' } },
    binaryData: Object.fromEntries(signatures.map((bytes, i) => [`${name}-${i + 1}`, bytes.toString('base64')])),
  };
}

export function renderSignatureConfigMap(configMap: ReturnType<typeof signatureConfigMap>): string {
  return yaml.dump(configMap, { lineWidth: -1 });
}
