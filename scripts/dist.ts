/**
 * `npm run dist [-- --out DIR] [--targets linux-amd64,linux-arm64] [--reproducible]`: prestage as one
 * self-contained executable per target, with Node.js's single executable application support.
 *
 * 1. esbuild bundles the application (src/cli/sea-app.ts: the CLI and the agent's own entry) into
 *    one CommonJS file with the build's identity (version, commit), the docs pages and the CRI
 *    proto (as protobufjs JSON) inlined, and the SEA's main script (src/cli/sea-main.ts), which
 *    answers `--version` and compiles the application, a SEA asset, only when needed;
 * 2. on the host, V8's code cache of the application after running help and completion
 *    (scripts/sea-warm.cjs): a code cache is tied to its V8 and architecture, so other targets
 *    start without one;
 * 3. per target, the Node.js binary of this very Node version (this one for the host's
 *    architecture, else the `node-linux-<arch>` npm package, cached under
 *    ~/.cache/prestage-dist/) gets its SEA blob (the main script and the assets) injected (postject);
 * 4. DIR/<target>/prestage, with `oc-prestage`, `kubectl-prestage` (the plugin names oc and
 *    kubectl look for) and `kubectl_complete-prestage`, `oc_complete-prestage` (their plugin
 *    completion) as links to it, and DIR/SHA256SUMS.
 * Same checkout, same Node version: the same bytes, but for V8's code cache in the host's blob,
 * which V8 does not write the same twice; `--reproducible` leaves it out (start-up then compiles
 * what it runs as it goes). The test builds twice and compares.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';
import { nodeBundleOptions, ROOT } from './node-bundle.js';

const TARGETS = { 'linux-amd64': 'x64', 'linux-arm64': 'arm64' } as const;
type Target = keyof typeof TARGETS;
/** The fuse Node.js looks for to know a SEA blob was injected (its documentation's value). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** oc and kubectl find plugins by these names, and kubectl (1.26+) a plugin's completion by the last two. */
const PLUGIN_NAMES = ['oc-prestage', 'kubectl-prestage', 'kubectl_complete-prestage', 'oc_complete-prestage'];
/** The SEA assets src/cli/sea-main.ts reads: the application, and V8's code cache of it. */
const APP_ASSET = 'app.cjs';
const CACHE_ASSET = 'app.cache';
const CACHE = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'prestage-dist', 'v1');

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function git(args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

/** The build's identity, inlined: a tree with changes is marked, not hidden. */
function buildInfo(): { version: string; commit: string } {
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const head = git(['rev-parse', 'HEAD']);
  const dirty = head !== undefined && git(['status', '--porcelain', '--untracked-files=no']) !== '';
  return { version, commit: head ? `${head}${dirty ? '-dirty' : ''}` : 'unknown' };
}

/**
 * yargs' factory, which the CLI loads without its help renderer (src/cli/main.ts): its package
 * exports do not name those files, so they are resolved by path.
 */
const yargsInternals: Plugin = {
  name: 'yargs-internals',
  setup(b) {
    b.onResolve({ filter: /^yargs\/build\/lib\// }, (args) => ({ path: join(ROOT, 'node_modules', args.path) }));
  },
};

/**
 * yargs looks for a package.json up from its main file to guess a version and read parser
 * settings (its "yargs" key); in the executable that file is the user's working directory, so it
 * walked up from there and let a stranger's package.json change how flags parse. prestage names
 * its version itself: nothing is found.
 */
const noPackageLookup: Plugin = {
  name: 'no-package-lookup',
  setup(b) {
    b.onResolve({ filter: /^escalade\/sync$/ }, () => ({ path: 'escalade-sync', namespace: 'no-package-lookup' }));
    b.onLoad({ filter: /.*/, namespace: 'no-package-lookup' }, () => ({ contents: 'export default function findUp() { return undefined; }', loader: 'js' }));
  },
};

/**
 * Every `string-width` (yargs', cliui's, wrap-ansi's) answers one-column text itself
 * (src/cli/narrow-width.ts) and loads the package, with its segmenter and emoji sets, only for
 * text that needs it: help renders without them.
 */
const narrowStringWidth: Plugin = {
  name: 'narrow-string-width',
  setup(b) {
    b.onResolve({ filter: /^string-width$/ }, async (args) => {
      if (args.pluginData === 'narrow-string-width') return undefined;
      const real = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: 'narrow-string-width' });
      if (real.errors.length) return { errors: real.errors };
      return { path: real.path, namespace: 'narrow-string-width' };
    });
    b.onLoad({ filter: /.*/, namespace: 'narrow-string-width' }, (args) => ({
      contents: `import { narrowWidth } from ${JSON.stringify(join(ROOT, 'src/cli/narrow-width.ts'))};
let width;
export default function stringWidth(text, options) {
  return narrowWidth(text, options) ?? (width ??= require(${JSON.stringify(args.path)}).default)(text, options);
}`,
      loader: 'js',
      resolveDir: ROOT,
    }));
  },
};

/**
 * The application (src/cli/sea-app.ts) as the `app.cjs` asset, wrapped as Node.js wraps a CommonJS
 * module (sea-main.ts compiles it as it is), and the SEA's main script (src/cli/sea-main.ts).
 */
async function bundle(work: string): Promise<void> {
  const info = buildInfo();
  const bundled = join(work, 'app.bundle.cjs');
  await build(nodeBundleOptions('src/cli/sea-app.ts', bundled, {
    plugins: [yargsInternals, narrowStringWidth, noPackageLookup],
    define: {
      __PRESTAGE_BUILD__: JSON.stringify(JSON.stringify(info)),
      // `prestage docs TOPIC` on a host that has only the executable.
      __PRESTAGE_DOCS__: JSON.stringify(JSON.stringify(docsForExecutable())),
      // Literal specifiers, so that esbuild bundles what src/cli/main.ts loads without yargs' help renderer.
      __PRESTAGE_YARGS_FACTORY__: JSON.stringify('yargs/build/lib/yargs-factory.js'),
      __PRESTAGE_YARGS_ARGV__: JSON.stringify('yargs/build/lib/utils/process-argv.js'),
      __PRESTAGE_Y18N__: JSON.stringify('y18n'),
      'import.meta.resolve': '__prestage_import_meta_resolve',
    },
    banner: 'const __prestage_import_meta_resolve = undefined;',
  }));
  writeFileSync(join(work, APP_ASSET), `(function (exports, require, module, __filename, __dirname) { ${readFileSync(bundled, 'utf8')}\n})`);
  await build(nodeBundleOptions('src/cli/sea-main.ts', join(work, 'prestage.cjs'), { define: { __PRESTAGE_BUILD__: JSON.stringify(JSON.stringify(info)) } }));
}

/** docs/*.md as `{ topic: text }`. */
function docsForExecutable(): Record<string, string> {
  const dir = join(ROOT, 'docs');
  return Object.fromEntries(readdirSync(dir).filter((name) => name.endsWith('.md')).sort().map((name) => [name.replace(/\.md$/, ''), readFileSync(join(dir, name), 'utf8')]));
}

/** The Node.js binary for `arch`, of this Node version: this one, or the npm package's. */
function nodeBinary(arch: 'x64' | 'arm64'): string {
  if (arch === process.arch) return process.execPath;
  const version = process.versions.node;
  const dir = join(CACHE, `node-${version}-linux-${arch}`);
  const binary = join(dir, 'package', 'bin', 'node');
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const tarball = execFileSync('npm', ['pack', `node-linux-${arch}@${version}`, '--silent', '--pack-destination', dir], { encoding: 'utf8' }).trim().split('\n').pop()!;
  execFileSync('tar', ['-xzf', join(dir, tarball), '-C', dir]);
  rmSync(join(dir, tarball));
  if (!existsSync(binary)) throw new Error(`node-linux-${arch}@${version} has no package/bin/node`);
  return binary;
}

/** V8's code cache of the application after a run of help and completion (scripts/sea-warm.cjs), with no V8 flags. */
function warmCodeCache(work: string): void {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  execFileSync(process.execPath, [join(ROOT, 'scripts/sea-warm.cjs'), join(work, APP_ASSET), join(work, CACHE_ASSET)], { cwd: work, env, stdio: ['ignore', 'ignore', 'inherit'] });
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

async function main(): Promise<void> {
  const outDir = resolve(flag('out') ?? join(ROOT, 'dist-bin'));
  const targets = (flag('targets') ?? Object.keys(TARGETS).join(',')).split(',') as Target[];
  // V8's code cache saves compiling what help and completion run, but is not the same bytes twice: --reproducible leaves it out.
  const codeCache = !process.argv.includes('--reproducible');
  for (const t of targets) if (!(t in TARGETS)) throw new Error(`--targets: unknown target ${t}; known: ${Object.keys(TARGETS).join(', ')}`);
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const work = join(tmpdir(), `prestage-dist-${process.pid}`);
  mkdirSync(work, { recursive: true });
  try {
    await bundle(work);
    // The code cache is V8's own: of this very Node.js, so of the host's architecture only.
    const cached = codeCache && targets.some((t) => TARGETS[t] === process.arch);
    if (cached) warmCodeCache(work);
    const sums: string[] = [];
    for (const target of targets) {
      const arch = TARGETS[target];
      const blob = join(work, `${target}.blob`);
      const config = join(work, `${target}.sea.json`);
      // Paths relative to the work directory: the blob records the main script's name.
      const assets = { [APP_ASSET]: APP_ASSET, ...(cached && arch === process.arch ? { [CACHE_ASSET]: CACHE_ASSET } : {}) };
      writeFileSync(config, JSON.stringify({ main: 'prestage.cjs', output: `${target}.blob`, disableExperimentalSEAWarning: true, useCodeCache: false, assets }));
      execFileSync(process.execPath, ['--experimental-sea-config', config], { cwd: work, stdio: ['ignore', 'ignore', 'inherit'] });
      const dir = join(outDir, target);
      mkdirSync(dir);
      const executable = join(dir, 'prestage');
      copyFileSync(nodeBinary(arch), executable);
      chmodSync(executable, 0o755);
      execFileSync(process.execPath, [join(ROOT, 'node_modules/postject/dist/cli.js'), executable, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE], { stdio: ['ignore', 'ignore', 'inherit'] });
      for (const plugin of PLUGIN_NAMES) symlinkSync('prestage', join(dir, plugin));
      sums.push(`${sha256(executable)}  ${relative(outDir, executable)}`);
      process.stderr.write(`dist: ${relative(ROOT, executable)} (${target}, Node.js ${process.versions.node}${cached && arch === process.arch ? ', code cache' : ''})\n`);
    }
    writeFileSync(join(outDir, 'SHA256SUMS'), `${sums.join('\n')}\n`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
