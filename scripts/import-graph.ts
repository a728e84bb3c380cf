/**
 * The house as its imports draw it: every relative import of every module under src/ (type
 * imports too; tests left out), the edges between top-level folders, circles between files and
 * between folders, and the largest files. `npx tsx scripts/import-graph.ts [--json] [--src DIR]`; the unit
 * test src/import-graph.test.ts holds the layering to its rules with the same reading.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'src');

export interface ImportGraph {
  /** Module → the modules it imports, as paths relative to src/ (`agent/reconcile.ts`). */
  readonly modules: ReadonlyMap<string, readonly string[]>;
  readonly lines: ReadonlyMap<string, number>;
}

export function readImportGraph(src = SRC): ImportGraph {
  const files = sourceFiles(src);
  const modules = new Map<string, string[]>();
  const lines = new Map<string, number>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const specifiers = [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s+'(\.{1,2}\/[^']+)'/gms), ...text.matchAll(/\bimport\('(\.{1,2}\/[^']+)'\)/g)].map((m) => m[1]!);
    modules.set(relative(src, file), specifiers.map((s) => relative(src, resolve(dirname(file), s.replace(/\.js$/, '.ts')))));
    lines.set(relative(src, file), text.split('\n').length - (text.endsWith('\n') ? 1 : 0));
  }
  return { modules, lines };
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** `agent/reconcile.ts` → `agent`; a file directly under src/ is its own folder (`errors.ts`). */
export function folderOf(module: string): string {
  return module.includes(sep) ? module.split(sep)[0]! : module.replace(/\.ts$/, '');
}

/** Edges between top-level folders, with how many imports make each. */
export function folderEdges(graph: ImportGraph): Map<string, number> {
  const edges = new Map<string, number>();
  for (const [from, imports] of graph.modules) {
    for (const to of imports) {
      if (!graph.modules.has(to)) continue;
      const [a, b] = [folderOf(from), folderOf(to)];
      if (a !== b) edges.set(`${a} -> ${b}`, (edges.get(`${a} -> ${b}`) ?? 0) + 1);
    }
  }
  return new Map([...edges].sort(([x], [y]) => x.localeCompare(y)));
}

/** Circles in a directed graph: each strongly connected component of more than one node (Tarjan). */
export function circles(nodes: Iterable<string>, next: (node: string) => Iterable<string>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const to of next(node)) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let popped: string;
      do {
        popped = stack.pop()!;
        onStack.delete(popped);
        component.push(popped);
      } while (popped !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of nodes) if (!index.has(node)) visit(node);
  return found;
}

export function fileCircles(graph: ImportGraph): string[][] {
  return circles(graph.modules.keys(), (m) => (graph.modules.get(m) ?? []).filter((to) => graph.modules.has(to)));
}

export function folderCircles(graph: ImportGraph): string[][] {
  const edges = [...folderEdges(graph).keys()].map((e) => e.split(' -> ') as [string, string]);
  const folders = new Set(edges.flat());
  return circles(folders, (f) => edges.filter(([a]) => a === f).map(([, b]) => b));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // `--src DIR`: another tree (a worktree of an earlier commit, for a before/after).
  const at = process.argv.indexOf('--src');
  const graph = readImportGraph(at > 0 ? resolve(process.argv[at + 1]!) : SRC);
  const largest = [...graph.lines].sort(([, a], [, b]) => b - a).slice(0, 15);
  const report = {
    modules: graph.modules.size,
    lines: [...graph.lines.values()].reduce((a, b) => a + b, 0),
    largest: Object.fromEntries(largest),
    folderEdges: Object.fromEntries(folderEdges(graph)),
    folderCircles: folderCircles(graph),
    fileCircles: fileCircles(graph),
  };
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(report, null, 2));
  } else {
    console.log(`${report.modules} modules, ${report.lines} lines (tests left out)`);
    console.log('largest files:');
    for (const [file, n] of largest) console.log(`  ${String(n).padStart(5)}  ${file}`);
    console.log('imports between top-level folders:');
    for (const [edge, n] of Object.entries(report.folderEdges)) console.log(`  ${edge} (${n})`);
    console.log(`folder circles: ${report.folderCircles.length === 0 ? 'none' : report.folderCircles.map((c) => c.join(' <-> ')).join('; ')}`);
    console.log(`file circles: ${report.fileCircles.length === 0 ? 'none' : report.fileCircles.map((c) => c.join(' <-> ')).join('; ')}`);
  }
}
