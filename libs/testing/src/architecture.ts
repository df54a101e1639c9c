import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The layering rules of the repository, checked over its sources (architecture.spec.ts runs
 * this in CI):
 * - a lib never imports an app, and an app never imports another app;
 * - libs import each other through their `@app/<lib>` index only, and without a cycle;
 * - the generation lib never imports the batches lib (the generator must not build batch
 *   creation; what both need of the task lives in the tasks lib);
 * - each table with an owner is written by its owner only: the tasks lib writes the tasks
 *   table and the batches table (a batch's tallies are written in the statements that end
 *   its tasks, so the two rows have one writer), and the upstream_batches table (a group's
 *   steps are recorded with its tasks' moves).
 */

export interface SourceFile {
  /** Relative to the repository root, with forward slashes. */
  path: string;
  text: string;
}

type Room = { kind: 'app' | 'lib'; name: string };

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;
const FORBIDDEN_LIB_IMPORTS: Record<string, string[]> = { generation: ['batches'] };
/** Tables with one writer, and the folder of the lib that owns each. */
const TABLE_OWNERS: Record<string, string> = { tasks: 'libs/tasks/', batches: 'libs/tasks/', upstream_batches: 'libs/tasks/' };
/** A statement that writes `table`, assembled so that this file itself does not match. */
const writeOf = (table: string): RegExp =>
  new RegExp([`\\bUPDATE\\s+${table}\\b`, `\\bINSERT\\s+INTO\\s+${table}\\b`, `\\bDELETE\\s+FROM\\s+${table}\\b`].join('|'), 'i');
const TABLE_WRITES = Object.entries(TABLE_OWNERS).map(([table, owner]) => ({ table, owner, write: writeOf(table) }));

function roomOf(file: string): Room | null {
  const m = /^(apps|libs)\/([^/]+)\//.exec(file);
  return m ? { kind: m[1] === 'apps' ? 'app' : 'lib', name: m[2] } : null;
}

function importsOf(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => m[1]);
}

/** Every broken rule, one line each; empty when the sources keep them all. */
export function architectureViolations(files: readonly SourceFile[]): string[] {
  const violations: string[] = [];
  const libGraph = new Map<string, Set<string>>();

  for (const file of files) {
    const from = roomOf(file.path);
    if (!from) continue;
    for (const { table, owner, write } of TABLE_WRITES) {
      if (!file.path.startsWith(owner) && write.test(file.text)) {
        violations.push(`${file.path} writes the ${table} table; only ${owner.slice(0, -1)} may`);
      }
    }
    for (const spec of importsOf(file.text)) {
      let to: Room | null = null;
      let throughIndex = true;
      const alias = /^@app\/([^/]+)(\/.*)?$/.exec(spec);
      if (alias) {
        to = { kind: 'lib', name: alias[1] };
        throughIndex = !alias[2];
      } else if (spec.startsWith('.')) {
        to = roomOf(path.posix.normalize(path.posix.join(path.posix.dirname(file.path), spec)));
        throughIndex = false;
        if (to && to.kind === from.kind && to.name === from.name) continue;
      } else {
        continue;
      }
      if (!to) continue;
      const what = `${file.path} imports ${spec}`;
      if (from.kind === 'lib' && to.kind === 'app') violations.push(`${what}: a lib imports an app`);
      else if (from.kind === 'app' && to.kind === 'app' && to.name !== from.name) violations.push(`${what}: an app imports another app`);
      else if (to.kind === 'lib' && to.name !== from.name) {
        if (!throughIndex) violations.push(`${what}: not through the lib's @app/${to.name} index`);
        if (from.kind === 'lib') {
          if (FORBIDDEN_LIB_IMPORTS[from.name]?.includes(to.name)) violations.push(`${what}: libs/${from.name} must not import @app/${to.name}`);
          if (!libGraph.has(from.name)) libGraph.set(from.name, new Set());
          libGraph.get(from.name)!.add(to.name);
        }
      }
    }
  }
  return [...violations, ...cyclesOf(libGraph).map((cycle) => `import cycle between libs: ${cycle.join(' -> ')}`)];
}

/** One cycle per strongly connected knot, found by depth-first search. */
function cyclesOf(graph: Map<string, Set<string>>): string[][] {
  const cycles: string[][] = [];
  const done = new Set<string>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const visit = (node: string): void => {
    stack.push(node);
    onStack.add(node);
    for (const next of [...(graph.get(node) ?? [])].sort()) {
      if (onStack.has(next)) cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!done.has(next)) visit(next);
    }
    stack.pop();
    onStack.delete(node);
    done.add(node);
  };
  for (const node of [...graph.keys()].sort()) if (!done.has(node)) visit(node);
  return cycles;
}

/** The TypeScript sources under apps/ and libs/ of the repository at `root`. */
export function readSources(root: string): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts')) files.push({ path: rel, text: fs.readFileSync(path.join(root, rel), 'utf8') });
    }
  };
  for (const top of ['apps', 'libs']) walk(top);
  return files;
}
