/**
 * The house plan, held by its imports (scripts/import-graph.ts reads them: every relative
 * import of every module under src/, type imports too): no circles between files or between
 * top-level folders, and none of the edges the layering forbids.
 */
import { expect, it } from 'vitest';
import { fileCircles, folderCircles, folderEdges, readImportGraph } from '../scripts/import-graph.js';

/** `from -> to`: why it may not be. */
const FORBIDDEN: Readonly<Record<string, string>> = {
  'agent -> cluster': 'the node agent reaches the API through kube/ and names through api/, never the CLI side',
  'agent -> cli': 'the node agent is started by the CLI, not the other way',
  'agent -> install': 'names the installer and the agent share live in api/',
  'render -> cluster': 'rendering is pure: plan in, objects out',
  'install -> cluster': 'the installer reaches the API through kube/',
  'install -> cli': 'the installer is a library of the CLI',
  'kube -> api': 'kube/ knows Kubernetes, not prestage',
  'kube -> cluster': 'kube/ knows Kubernetes, not prestage',
  'api -> cluster': 'api/ holds names and shapes, no behaviour of a backend',
  'net -> registry': 'the network layer serves registries, it does not know them',
  'units -> render': 'units/ is below every printer',
  'signatures -> cli': 'signature checks are a library; flags live in cli/',
  'signatures -> bundle': 'bundles use signatures, not the other way',
  'plan -> cluster': 'planning reads a live cluster through what the CLI hands it',
  'graph -> plan': 'the update graph is a source beside the release: plan gets a path as a list of releases',
  'graph -> cluster': 'the update graph is read from what the CLI hands it (a URL, a file, ClusterVersion spec.upstream)',
  'cli -> kube': 'the CLI reads flags and prints; cluster/, install/ and verify/ speak the API (cluster/connect.ts hands it a client)',
};

const graph = readImportGraph();

it('no module of src/ imports itself back through others', () => {
  expect(graph.modules.size).toBeGreaterThan(100);
  expect(fileCircles(graph)).toEqual([]);
});

it('no top-level folder imports itself back through others', () => {
  expect(folderCircles(graph)).toEqual([]);
});

it('no edge the layering forbids', () => {
  const edges = [...folderEdges(graph).keys()];
  expect(edges.length).toBeGreaterThan(20);
  expect(edges.filter((edge) => edge in FORBIDDEN).map((edge) => `${edge}: ${FORBIDDEN[edge]}`)).toEqual([]);
});
