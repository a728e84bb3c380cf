import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { catalogResources, resourceName } from './catalog-resources.js';

const DIGEST = `sha256:${'0123456789ab'.repeat(5)}cdef`;

describe('CatalogSource and ClusterCatalog', () => {
  it('names them as oc-mirror does, from the tag, and points both at the catalog by digest', () => {
    const [cs, cc] = catalogResources(`mirror:5000/redhat/redhat-operator-index@${DIGEST}`, 'mirror:5000/redhat/redhat-operator-index:v4.16');
    expect([cs.file, cc.file]).toEqual(['cs-redhat-operator-index-v4-16.yaml', 'cc-redhat-operator-index-v4-16.yaml']);
    expect(yaml.load(cs.text)).toEqual({
      apiVersion: 'operators.coreos.com/v1alpha1',
      kind: 'CatalogSource',
      metadata: { name: 'cs-redhat-operator-index-v4-16', namespace: 'openshift-marketplace', labels: { 'app.kubernetes.io/managed-by': 'prestage' } },
      spec: { sourceType: 'grpc', image: `mirror:5000/redhat/redhat-operator-index@${DIGEST}` },
    });
    expect(yaml.load(cc.text)).toMatchObject({ apiVersion: 'olm.operatorframework.io/v1', kind: 'ClusterCatalog', spec: { priority: 0, source: { type: 'Image', image: { ref: `mirror:5000/redhat/redhat-operator-index@${DIGEST}` } } } });
  });

  it('takes the first 12 characters of a tag, or of the digest when untagged', () => {
    expect(catalogResources(`m/idx@${DIGEST}`, 'm/idx:v4.16-2024.07.01-x')[0].name).toBe('cs-idx-v4-16-2024-0');
    expect(catalogResources(`m/idx@${DIGEST}`, undefined)[1].name).toBe('cc-idx-0123456789ab');
  });

  it('makes a DNS-1035 label of what oc-mirror would refuse', () => {
    expect(resourceName('cs', 'my_index', 'V1')).toBe('cs-my-index-v1');
    expect(resourceName('cc', 'a'.repeat(70), 'v1')).toHaveLength(63);
  });
});
