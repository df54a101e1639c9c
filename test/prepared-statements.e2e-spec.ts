import { randomBytes } from 'node:crypto';
import { createDataSource, PreparedStatement, queryPrepared, runStatementsUnnamed } from '@app/database';

/**
 * queryPrepared names its statements (prepared once per connection) unless the data source was
 * told otherwise (DATABASE_PREPARED_STATEMENTS=false, for a transaction-mode pooler): then
 * nothing is left prepared on the server connection for another pooled client to collide with.
 */
describe('queryPrepared, named and unnamed', () => {
  async function run(unnamed: boolean): Promise<{ answer: number; prepared: number }> {
    // A name of its own: behind a pooler, a server connection keeps what an earlier client prepared on it.
    const STATEMENT: PreparedStatement = { name: `kiln_test_probe_${randomBytes(4).toString('hex')}`, text: 'SELECT $1::int + 1 AS n' };
    const preparedOnConnection = `SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = '${STATEMENT.name}'`;
    const ds = createDataSource(process.env.DATABASE_URL as string, { extra: { max: 1 } });
    await ds.initialize();
    try {
      if (unnamed) runStatementsUnnamed(ds);
      // One transaction: both statements on one server connection, pooler or not.
      return await ds.transaction(async (m) => {
        const [{ n: answer }] = await queryPrepared<{ n: number }>(m, STATEMENT, [41]);
        const [{ n: prepared }] = await m.query(preparedOnConnection);
        return { answer, prepared };
      });
    } finally {
      await ds.destroy();
    }
  }

  it('named by default: the statement stays prepared on the connection', async () => {
    expect(await run(false)).toEqual({ answer: 42, prepared: 1 });
  });

  it('unnamed when told: same rows, nothing prepared', async () => {
    expect(await run(true)).toEqual({ answer: 42, prepared: 0 });
  });
});
