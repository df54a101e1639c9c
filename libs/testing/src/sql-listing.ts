import * as fs from 'node:fs';
import * as path from 'node:path';
import * as ts from 'typescript';
import { readSources, SourceFile } from './architecture';

/**
 * The listing of every SQL statement that writes the tasks, batches and upstream_batches
 * tables (libs/tasks/queries/writes.sql), read from the source text of their one writer,
 * libs/tasks (libs/testing/src/architecture.ts checks no one else writes them). Checked in so
 * that a change of SQL is a diff a reviewer reads; `npm run sql:listing` (this file, run by
 * ts-node) writes it again, and sql-listing.spec.ts fails while it is stale.
 *
 * A statement is a string or template literal that writes one of the tables; it is named by
 * its prepared statement's name when it has one, the constant that holds it, and the function
 * it is written in. `${...}` are the source's interpolations, as written: the fragments they
 * insert (tallyAssignments, statusIs, ...) are reviewed in their own files.
 */

export const SQL_LISTING_PATH = 'libs/tasks/queries/writes.sql';
/** The folder whose sources write the tables. */
export const SQL_LISTING_SOURCES = 'libs/tasks/src/';

const WRITE = /\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+(?:tasks|batches|upstream_batches)\b/i;

export interface WriteStatement {
  file: string;
  /** Prepared statement name, constant and function, those the statement has. */
  name: string;
  text: string;
}

/** The writes in `files` (specs left out), in file order then source order. */
export function writeStatements(files: readonly SourceFile[]): WriteStatement[] {
  const statements: WriteStatement[] = [];
  const sources = files.filter((f) => f.path.startsWith(SQL_LISTING_SOURCES) && !/\.spec(?:-[\w-]+)?\.ts$/.test(f.path));
  for (const file of [...sources].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    const source = ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest, true);
    const preparedNames = preparedNamesOf(source);
    const visit = (node: ts.Node): void => {
      if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node)) {
        const text = node.getText(source).slice(1, -1);
        if (WRITE.test(text)) statements.push({ file: file.path, name: nameOf(node, source, preparedNames), text: dedent(text) });
        return;
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return statements;
}

/** The listing's text, as checked in. */
export function sqlListing(files: readonly SourceFile[]): string {
  const header = [
    '-- Every SQL statement that writes the tasks, batches and upstream_batches tables, read from',
    `-- the source text of ${SQL_LISTING_SOURCES} (libs/testing/src/sql-listing.ts). Generated: do not edit;`,
    '-- `npm run sql:listing` writes it again, and a unit test fails while it is stale.',
    "-- ${...} are the source's interpolations, as written.",
  ];
  const entries = writeStatements(files).map((s) => [`-- ${s.file}: ${s.name}`, `${s.text};`].join('\n'));
  return `${[header.join('\n'), ...entries].join('\n\n')}\n`;
}

/** Constant -> prepared statement name, for `{ name: 'kiln_x', text: CONSTANT }` in the file. */
function preparedNamesOf(source: ts.SourceFile): Map<string, string> {
  const names = new Map<string, string>();
  const visit = (node: ts.Node): void => {
    if (ts.isObjectLiteralExpression(node)) {
      const name = propertyOf(node, 'name');
      const text = propertyOf(node, 'text');
      if (name && ts.isStringLiteralLike(name) && text && ts.isIdentifier(text)) names.set(text.text, name.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

function propertyOf(object: ts.ObjectLiteralExpression, key: string): ts.Expression | undefined {
  for (const p of object.properties) if (ts.isPropertyAssignment(p) && p.name.getText() === key) return p.initializer;
  return undefined;
}

/** `kiln_x (CONSTANT)`, `kiln_x in Class.method`, `CONSTANT`, `Class.method`, ... */
function nameOf(literal: ts.Node, source: ts.SourceFile, preparedNames: Map<string, string>): string {
  let prepared: string | undefined;
  let constant: string | undefined;
  let where: string | undefined;
  for (let node: ts.Node | undefined = literal.parent; node && !ts.isSourceFile(node); node = node.parent) {
    if (!prepared && ts.isPropertyAssignment(node) && node.name.getText(source) === 'text' && ts.isObjectLiteralExpression(node.parent)) {
      const name = propertyOf(node.parent, 'name');
      if (name && ts.isStringLiteralLike(name)) prepared = name.text;
    }
    if (!constant && !where && ts.isVariableDeclaration(node) && ts.isIdentifier(node.name)) {
      constant = node.name.text;
      prepared ??= preparedNames.get(constant);
    }
    if (!where && (ts.isMethodDeclaration(node) || ts.isFunctionDeclaration(node)) && node.name) {
      const owner = ts.isClassDeclaration(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
      where = `${owner}${node.name.getText(source)}`;
    }
  }
  // A constant inside a function is a local name: the function says where it is.
  if (where) constant = undefined;
  const named = constant ? `${prepared ? `${prepared} ` : ''}${prepared ? `(${constant})` : constant}` : prepared;
  return [named, where && `in ${where}`].filter(Boolean).join(' ') || '(top level)';
}

/**
 * The statement with its common indentation removed and its blank ends trimmed. A statement
 * that starts on the line of its quote is indented as the lines after it are.
 */
function dedent(text: string): string {
  const lines = text.replace(/\s+$/, '').split('\n');
  const block = lines[0].trim() === '';
  while (lines.length > 0 && lines[0].trim() === '') lines.shift();
  const indented = (block ? lines : lines.slice(1)).filter((l) => l.trim() !== '');
  const indent = indented.length > 0 ? Math.min(...indented.map((l) => /^ */.exec(l)![0].length)) : 0;
  return [block ? lines[0].slice(indent) : lines[0].trim(), ...lines.slice(1).map((l) => l.slice(indent))].join('\n');
}

/** `npm run sql:listing`: writes the listing of the repository this file is in. */
if (require.main === module) {
  const root = path.resolve(__dirname, '../../..');
  fs.mkdirSync(path.dirname(path.join(root, SQL_LISTING_PATH)), { recursive: true });
  fs.writeFileSync(path.join(root, SQL_LISTING_PATH), sqlListing(readSources(root)));
  console.log(`wrote ${SQL_LISTING_PATH}`);
}
