import * as fs from 'node:fs';
import * as path from 'node:path';
import { readSources, SourceFile } from './architecture';
import { SQL_LISTING_PATH, sqlListing, writeStatements } from './sql-listing';

const file = (p: string, ...lines: string[]): SourceFile => ({ path: p, text: lines.join('\n') });
/** A write of `table`, assembled so that this file itself writes nothing (architecture.ts). */
const write = (verb: string, table: string, rest: string) => `${verb} ${table} ${rest}`;

describe('the listing of the SQL that writes tasks, batches and upstream_batches', () => {
  it('is up to date (else run `npm run sql:listing` and commit libs/tasks/queries/writes.sql)', () => {
    const root = path.resolve(__dirname, '../../..');
    const checkedIn = fs.readFileSync(path.join(root, SQL_LISTING_PATH), 'utf8');
    expect(checkedIn).toBe(sqlListing(readSources(root)));
    expect(checkedIn).toContain('-- libs/tasks/src/task-success.ts: kiln_succeed_group (SUCCEED_GROUP)');
  });

  it('names each write by its prepared statement, constant and function, in file and source order', () => {
    const statements = writeStatements([
      file(
        'libs/tasks/src/b.ts',
        `const GROUP_SQL = \`\n  ${write('UPDATE', 'tasks', 'SET x = 1')}\n   WHERE id = ANY($1)\`;`,
        `const GROUP: PreparedStatement = { name: 'kiln_group', text: GROUP_SQL };`,
        `const INLINE: PreparedStatement = { name: 'kiln_inline', text: '${write('DELETE FROM', 'upstream_batches', 'WHERE id = $1')}' };`,
        `export class Store {`,
        `  async move(m) {`,
        `    await m.query(\`${write('INSERT INTO', 'batches', '(id) VALUES ($1)')}\`, [id]);`,
        `    await m.query(\`SELECT id FROM tasks WHERE \${where}\`);`,
        `  }`,
        `}`,
      ),
      file(
        'libs/tasks/src/a.ts',
        `export function clear(db) {`,
        `  return db.query(\`${write('UPDATE', 'batches', 'SET preview_url = NULL WHERE id = \\${id}')}\`);`,
        `}`,
      ),
      file('libs/tasks/src/a.spec.ts', `await db.query(\`${write('UPDATE', 'tasks', 'SET x = 2')}\`);`),
      file('libs/other/src/c.ts', `await db.query(\`${write('UPDATE', 'tasks', 'SET x = 3')}\`);`),
    ]);
    expect(statements).toEqual([
      { file: 'libs/tasks/src/a.ts', name: 'in clear', text: write('UPDATE', 'batches', 'SET preview_url = NULL WHERE id = \\${id}') },
      {
        file: 'libs/tasks/src/b.ts',
        name: 'kiln_group (GROUP_SQL)',
        text: `${write('UPDATE', 'tasks', 'SET x = 1')}\n WHERE id = ANY($1)`,
      },
      { file: 'libs/tasks/src/b.ts', name: 'kiln_inline (INLINE)', text: write('DELETE FROM', 'upstream_batches', 'WHERE id = $1') },
      { file: 'libs/tasks/src/b.ts', name: 'in Store.move', text: write('INSERT INTO', 'batches', '(id) VALUES ($1)') },
    ]);
  });

  it('shows a change of SQL as a change of the listing', () => {
    const before = sqlListing([file('libs/tasks/src/a.ts', `const X = \`${write('UPDATE', 'tasks', 'SET a = 1')}\`;`)]);
    const after = sqlListing([file('libs/tasks/src/a.ts', `const X = \`${write('UPDATE', 'tasks', 'SET a = 2')}\`;`)]);
    expect(before).toContain(`-- libs/tasks/src/a.ts: X\n${write('UPDATE', 'tasks', 'SET a = 1')};\n`);
    expect(after).not.toBe(before);
  });
});
