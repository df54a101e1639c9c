import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The layering rules of the repository, checked over its sources (architecture.spec.ts runs
 * this in CI):
 * - a lib never imports an app, and an app never imports another app;
 * - libs import each other through their `@app/<lib>` index only, and without a cycle;
 * - files import each other without a cycle, inside a lib or an app as well (relative imports
 *   resolved to files, `./dir` to `./dir/index.ts`; `import type` and `export ... from` count):
 *   a ground-floor file that reaches the top through a re-export is a knot all the same;
 * - the generation lib never imports the batches lib (the generator must not build batch
 *   creation; what both need of the task lives in the tasks lib), nor does the webhooks lib
 *   (the batch object its events carry lives in the tasks lib, beside the task object); the
 *   generator app never reaches the batches lib, directly or through any lib it loads;
 * - production code never imports test support: a file under apps/ or libs/ that is not a
 *   spec (`*.spec.ts`, `*.e2e-spec.ts`, `*.spec-helpers.ts`) nor test support itself never
 *   imports a fake (`*.fake.ts`, `fake-*.ts`), libs/testing (`@app/testing`) or test/, so
 *   production images carry none of them;
 * - specs and test support do not count towards the libs' layering: a lib's spec may import
 *   `@app/testing` while libs/testing imports that lib;
 * - each table with an owner is written by its owner only: the tasks lib writes the tasks
 *   table and the batches table (a batch's tallies are written in the statements that end
 *   its tasks, so the two rows have one writer), and the upstream_batches table (a group's
 *   steps are recorded with its tasks' moves); the payments lib writes credit_packs and
 *   credit_purchases (a purchase row is written in the transaction that credits it).
 */

export interface SourceFile {
  /** Relative to the repository root, with forward slashes. */
  path: string;
  text: string;
}

type Room = { kind: 'app' | 'lib'; name: string };

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;
const FORBIDDEN_LIB_IMPORTS: Record<string, string[]> = { generation: ['batches'], webhooks: ['batches'] };
/** Libs an app must not load at all, through any chain of libs. */
const FORBIDDEN_APP_REACH: Record<string, string[]> = { generator: ['batches'] };
/** Tables with one writer, and the folder of the lib that owns each. */
const TABLE_OWNERS: Record<string, string> = {
  tasks: 'libs/tasks/',
  batches: 'libs/tasks/',
  upstream_batches: 'libs/tasks/',
  credit_packs: 'libs/payments/',
  credit_purchases: 'libs/payments/',
};
/** A statement that writes `table`, assembled so that this file itself does not match. */
const writeOf = (table: string): RegExp =>
  new RegExp([`\\bUPDATE\\s+${table}\\b`, `\\bINSERT\\s+INTO\\s+${table}\\b`, `\\bDELETE\\s+FROM\\s+${table}\\b`].join('|'), 'i');
const TABLE_WRITES = Object.entries(TABLE_OWNERS).map(([table, owner]) => ({ table, owner, write: writeOf(table) }));

/** Libs that are test support as a whole. */
const TEST_SUPPORT_LIBS = ['testing'];
const SPEC = /\.(?:[\w-]+-)?spec(?:-[\w-]+)?\.tsx?$/;
const FAKE_NAME = /(?:^|\/)fake-[^/]*$|\.fake(?:\.tsx?)?$/;

function roomOf(file: string): Room | null {
  const m = /^(apps|libs)\/([^/]+)\//.exec(file);
  return m ? { kind: m[1] === 'apps' ? 'app' : 'lib', name: m[2] } : null;
}

function importsOf(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => m[1]);
}

/** A spec, or a spec's helpers. */
export function isSpec(file: string): boolean {
  return SPEC.test(file);
}

/** A fake, or anything else that exists for tests only (libs/testing, test/). */
export function isTestSupport(file: string): boolean {
  return FAKE_NAME.test(file) || file.startsWith('test/') || TEST_SUPPORT_LIBS.some((lib) => file.startsWith(`libs/${lib}/`));
}

/** What ships: apps and libs, less specs and test support. */
export function isProduction(file: string): boolean {
  return roomOf(file) !== null && !isSpec(file) && !isTestSupport(file);
}

/** The file a relative import names, among `known`; else the path it names, unresolved. */
function resolveRelative(from: string, spec: string, known: ReadonlySet<string>): { path: string; found: boolean } {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  const candidates = [base, `${base}.ts`, `${base}.tsx`, base.replace(/\.js$/, '.ts'), `${base}/index.ts`, `${base}/index.tsx`];
  const hit = candidates.find((c) => known.has(c));
  return hit ? { path: hit, found: true } : { path: base, found: false };
}

/** Every broken rule, one line each; empty when the sources keep them all. */
export function architectureViolations(files: readonly SourceFile[]): string[] {
  const violations: string[] = [];
  const known = new Set(files.map((f) => f.path));
  /** Lib -> the libs its production files import. */
  const libGraph = new Map<string, Set<string>>();
  /** App -> each lib its production files import, and the first file that does. */
  const appLibs = new Map<string, Map<string, string>>();
  /** File -> the files of its own lib or app it imports. */
  const fileGraph = new Map<string, Set<string>>();
  const edge = (graph: Map<string, Set<string>>, from: string, to: string): void => {
    if (!graph.has(from)) graph.set(from, new Set());
    graph.get(from)!.add(to);
  };

  for (const file of files) {
    const from = roomOf(file.path);
    if (!from) continue;
    const production = isProduction(file.path);
    for (const { table, owner, write } of TABLE_WRITES) {
      if (!file.path.startsWith(owner) && write.test(file.text)) {
        violations.push(`${file.path} writes the ${table} table; only ${owner.slice(0, -1)} may`);
      }
    }
    for (const spec of importsOf(file.text)) {
      let to: Room | null;
      let throughIndex: boolean;
      const what = `${file.path} imports ${spec}`;
      const alias = /^@app\/([^/]+)(\/.*)?$/.exec(spec);
      if (alias) {
        to = { kind: 'lib', name: alias[1] };
        throughIndex = !alias[2];
        if (production && TEST_SUPPORT_LIBS.includes(alias[1])) violations.push(`${what}: production code imports a fake`);
      } else if (spec.startsWith('.')) {
        const target = resolveRelative(file.path, spec, known);
        if (production && isTestSupport(target.path)) violations.push(`${what}: production code imports a fake`);
        to = roomOf(target.path);
        throughIndex = false;
        if (to && to.kind === from.kind && to.name === from.name) {
          if (target.found) edge(fileGraph, file.path, target.path);
          continue;
        }
      } else {
        continue;
      }
      if (!to) continue;
      if (from.kind === 'lib' && to.kind === 'app') violations.push(`${what}: a lib imports an app`);
      else if (from.kind === 'app' && to.kind === 'app' && to.name !== from.name) violations.push(`${what}: an app imports another app`);
      else if (to.kind === 'lib' && to.name !== from.name) {
        if (!throughIndex) violations.push(`${what}: not through the lib's @app/${to.name} index`);
        if (from.kind === 'lib' && FORBIDDEN_LIB_IMPORTS[from.name]?.includes(to.name))
          violations.push(`${what}: libs/${from.name} must not import @app/${to.name}`);
        // Tests may import test support that imports the lib under test: only what ships is layered.
        if (production && from.kind === 'lib') edge(libGraph, from.name, to.name);
        if (production && from.kind === 'app') {
          if (!appLibs.has(from.name)) appLibs.set(from.name, new Map());
          if (!appLibs.get(from.name)!.has(to.name)) appLibs.get(from.name)!.set(to.name, file.path);
        }
      }
    }
  }
  for (const [app, forbidden] of Object.entries(FORBIDDEN_APP_REACH)) {
    for (const lib of forbidden) {
      const imported = appLibs.get(app) ?? new Map<string, string>();
      const chain = pathTo(libGraph, [...imported.keys()], lib);
      if (chain)
        violations.push(`apps/${app} loads @app/${lib}: ${[imported.get(chain[0]), ...chain.map((l) => `@app/${l}`)].join(' -> ')}`);
    }
  }
  return [
    ...violations,
    ...cyclesOf(libGraph).map(
      ({ cycle, knotSize }) => `import cycle between libs: ${cycle.join(' -> ')}${knotNote(cycle, knotSize, 'libs')}`,
    ),
    ...cyclesOf(fileGraph).map(
      ({ cycle, knotSize }) => `import cycle between files: ${fileChain(cycle)}${knotNote(cycle, knotSize, 'files')}`,
    ),
  ];
}

/** Says when a cycle is one loop of a larger knot: cutting it leaves the others to report. */
function knotNote(cycle: string[], knotSize: number, what: string): string {
  return knotSize > cycle.length - 1 ? ` (one of the tightest loops of a knot of ${knotSize} ${what})` : '';
}

/** `libs/x/src/a.ts -> b.ts -> a.ts`: the first file in full, the others from the folder all share. */
function fileChain(cycle: string[]): string {
  let shared = path.posix.dirname(cycle[0]);
  while (!cycle.every((f) => f.startsWith(`${shared}/`))) shared = path.posix.dirname(shared);
  return [cycle[0], ...cycle.slice(1).map((f) => f.slice(shared.length + 1))].join(' -> ');
}

/** The shortest chain of imports from one of `starts` to `goal` (breadth first, inside `within` if given), or null. */
function pathTo(graph: Map<string, Set<string>>, starts: string[], goal: string, within?: ReadonlySet<string>): string[] | null {
  const previous = new Map<string, string | null>([...starts].sort().map((s) => [s, null]));
  const queue = [...previous.keys()];
  for (let node = queue.shift(); node !== undefined; node = queue.shift()) {
    if (node === goal) {
      const chain: string[] = [];
      for (let n: string | null = node; n !== null; n = previous.get(n)!) chain.unshift(n);
      return chain;
    }
    for (const next of [...(graph.get(node) ?? [])].sort()) {
      if (!previous.has(next) && (!within || within.has(next))) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return null;
}

/**
 * The tightest cycles of `graph`, each reported once: in every knot (a strongly connected set
 * of nodes), the shortest cycle through each node, kept when none in the knot is shorter,
 * starting from its smallest name; with the knot's size when it ties more than that cycle.
 * A knot of 40 files is a few lines, its tightest loops, which are the ones to cut first.
 */
function cyclesOf(graph: Map<string, Set<string>>): { cycle: string[]; knotSize: number }[] {
  const cycles: { cycle: string[]; knotSize: number }[] = [];
  for (const knot of knotsOf(graph)) {
    const found = new Map<string, string[]>();
    for (const node of [...knot].sort()) {
      const back = pathTo(
        graph,
        [...(graph.get(node) ?? [])].filter((n) => knot.has(n)),
        node,
        knot,
      );
      const cycle = fromSmallest(back ? [node, ...back.slice(0, -1)] : [node]);
      found.set(cycle.join('\n'), cycle);
    }
    const shortest = Math.min(...[...found.values()].map((c) => c.length));
    for (const cycle of found.values()) if (cycle.length === shortest) cycles.push({ cycle, knotSize: knot.size });
  }
  return cycles;
}

/** The strongly connected sets of more than one node, or of one that imports itself (Tarjan). */
function knotsOf(graph: Map<string, Set<string>>): Set<string>[] {
  const knots: Set<string>[] = [];
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of [...(graph.get(node) ?? [])].sort()) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const knot = new Set<string>();
    for (let n = stack.pop()!; ; n = stack.pop()!) {
      onStack.delete(n);
      knot.add(n);
      if (n === node) break;
    }
    if (knot.size > 1 || graph.get(node)?.has(node)) knots.push(knot);
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return knots;
}

/** The cycle through `nodes` (each once), rotated to start at the smallest, and closed. */
function fromSmallest(nodes: string[]): string[] {
  const start = nodes.indexOf([...nodes].sort()[0]);
  const rotated = [...nodes.slice(start), ...nodes.slice(0, start)];
  return [...rotated, rotated[0]];
}

/** The TypeScript sources (.ts, .tsx) under apps/ and libs/ of the repository at `root`. */
export function readSources(root: string): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (/\.tsx?$/.test(entry.name)) files.push({ path: rel, text: fs.readFileSync(path.join(root, rel), 'utf8') });
    }
  };
  for (const top of ['apps', 'libs']) walk(top);
  return files;
}
