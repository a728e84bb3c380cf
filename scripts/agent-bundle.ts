/**
 * `npm run build`'s second step: the node agent's own bundle, `dist/agent.cjs` (bin/prestage.js
 * runs its `runAgent` for `prestage agent`, so the DaemonSet's image carries and runs it). One minified
 * CommonJS file of the agent's code alone, from src/cli/agent-main.ts: no yargs, no other command
 * (the full CLI, dist/cli/main.js, is imported from there only for --help and refused flags);
 * the CRI proto inlined (the options scripts/node-bundle.ts shares with scripts/dist.ts); @kubernetes/client-node, which only a
 * kubeconfig's exec or auth-provider plugin would load (never in-cluster), left out with a
 * one-line error in its place. A smaller heap of code is memory on every node.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { nodeBundleOptions, ROOT } from './node-bundle.js';

const withoutClientNode: Plugin = {
  name: 'without-client-node',
  setup(b) {
    b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: 'client-node', namespace: 'left-out' }));
    b.onLoad({ filter: /.*/, namespace: 'left-out' }, () => ({
      contents: "export class KubeConfig { constructor() { throw new Error('this kubeconfig needs an exec or auth-provider plugin, which the agent does not carry: run the agent in-cluster or with a token or certificate kubeconfig'); } }",
      loader: 'js',
    }));
  },
};

/** agent-main's `import('./main.js')`: the full CLI beside the bundle (dist/cli/main.js), loaded when asked, not bundled. */
const fullCliBeside: Plugin = {
  name: 'full-cli-beside',
  setup(b) {
    b.onResolve({ filter: /^\.\/main\.js$/ }, (args) => (args.importer.endsWith(join('src', 'cli', 'agent-main.ts')) ? { path: './cli/main.js', external: true } : undefined));
  },
};

export async function bundleAgent(out = join(ROOT, 'dist', 'agent.cjs')): Promise<void> {
  await build(nodeBundleOptions('src/cli/agent-main.ts', out, { plugins: [withoutClientNode, fullCliBeside] }));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await bundleAgent();
