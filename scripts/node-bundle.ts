/**
 * The esbuild options both of prestage's own bundles share (scripts/agent-bundle.ts: the agent's
 * dist/agent.cjs; scripts/dist.ts: the CLI for the single executables): one minified CommonJS
 * file for Node 20, the CRI proto inlined, and `import.meta.url` answered from the file's own path.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BuildOptions } from 'esbuild';
import protobuf from 'protobufjs';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

const IMPORT_META_URL = 'const __prestage_import_meta_url = require("url").pathToFileURL(__filename).href;';

/** `extra` adds plugins, defines and banner code to the shared ones. */
export function nodeBundleOptions(entry: string, out: string, extra: Pick<BuildOptions, 'plugins' | 'define'> & { banner?: string } = {}): BuildOptions {
  return {
    entryPoints: [join(ROOT, entry)],
    outfile: out,
    bundle: true,
    minify: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    legalComments: 'none',
    logLevel: 'warning',
    plugins: extra.plugins ?? [],
    define: {
      // The CRI proto parsed here (field names camel-cased by protobufjs' loadSync), loaded with fromJSON there.
      __PRESTAGE_CRI_PROTO_JSON__: JSON.stringify(JSON.stringify(protobuf.loadSync(join(ROOT, 'proto/cri.proto')).toJSON())),
      'import.meta.url': '__prestage_import_meta_url',
      ...extra.define,
    },
    banner: { js: extra.banner ? `${IMPORT_META_URL} ${extra.banner}` : IMPORT_META_URL },
  };
}
