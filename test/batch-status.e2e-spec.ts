import { Client } from 'pg';
import { BatchStatus } from '@app/database';
import { batchIsDone, batchIsDoneSql, batchStatusFromCounts, batchStatusFromCountsSql, TaskCounts } from '@app/tasks';

/**
 * The batch status rule has a TypeScript form (reads) and an SQL form (the generator's tallies).
 * Both are evaluated over every combination of stored status and counts from 0 to 3, the SQL
 * form in one query over a VALUES list, and must agree everywhere.
 */
describe('batch status from counts: the TypeScript and SQL forms agree', () => {
  const STORED: BatchStatus[] = ['pending', 'running', 'succeeded', 'partial', 'failed', 'cancelled'];
  const N = [0, 1, 2, 3];
  let db: Client;

  beforeAll(async () => {
    db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
  });
  afterAll(() => db.end());

  it('over a grid of counts', async () => {
    const grid: { stored: BatchStatus; counts: TaskCounts }[] = [];
    for (const stored of STORED)
      for (const pending of N)
        for (const running of N)
          for (const succeeded of N)
            for (const failed of N)
              for (const cancelled of N) grid.push({ stored, counts: { pending, running, succeeded, failed, cancelled } });

    const values = grid
      .map(
        (_, i) =>
          `($${i * 7 + 1}::int, $${i * 7 + 2}::text, $${i * 7 + 3}::int, $${i * 7 + 4}::int, $${i * 7 + 5}::int, $${i * 7 + 6}::int, $${i * 7 + 7}::int)`,
      )
      .join(', ');
    const params = grid.flatMap((g, i) => [
      i,
      g.stored,
      g.counts.pending,
      g.counts.running,
      g.counts.succeeded,
      g.counts.failed,
      g.counts.cancelled,
    ]);
    const status = batchStatusFromCountsSql({
      stored: 'g.stored',
      pending: 'g.p',
      running: 'g.r',
      succeeded: 'g.s',
      failed: 'g.f',
      cancelled: 'g.c',
    });
    const { rows } = await db.query<{ i: number; status: string }>(
      `SELECT g.i, ${status} AS status FROM (VALUES ${values}) AS g(i, stored, p, r, s, f, c) ORDER BY g.i`,
      params,
    );

    expect(rows).toHaveLength(grid.length);
    const disagreements = grid
      .map((g, i) => ({ ...g, ts: batchStatusFromCounts(g.stored, g.counts), sql: rows[i].status }))
      .filter((d) => d.ts !== d.sql);
    expect(disagreements).toEqual([]);
    // The grid reaches every outcome, so agreement is not agreement on one answer.
    expect(new Set(rows.map((r) => r.status))).toEqual(new Set(STORED));
  });

  it('and so do the two forms of "done"', async () => {
    const grid: TaskCounts[] = [];
    for (const pending of N)
      for (const running of N) for (const succeeded of N) grid.push({ pending, running, succeeded, failed: 0, cancelled: 1 });
    const values = grid.map((_, i) => `($${i * 3 + 1}::int, $${i * 3 + 2}::int, $${i * 3 + 3}::int)`).join(', ');
    const params = grid.flatMap((g, i) => [i, g.pending, g.running]);
    const done = batchIsDoneSql({ pending: 'g.p', running: 'g.r', succeeded: '0', failed: '0', cancelled: '1' });
    const { rows } = await db.query<{ i: number; done: boolean }>(
      `SELECT g.i, ${done} AS done FROM (VALUES ${values}) AS g(i, p, r) ORDER BY g.i`,
      params,
    );
    expect(rows.map((r) => r.done)).toEqual(grid.map((g) => batchIsDone(g)));
    expect(new Set(rows.map((r) => r.done))).toEqual(new Set([true, false]));
  });
});
