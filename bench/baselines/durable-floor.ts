import { randomBytes, randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { measureWindow, WindowFigures } from '../lib/harness';
import { KilnStack } from '../lib/kiln';
import { chunks, round } from '../lib/util';

/**
 * Which indexes the floor's table carries: all of `tasks`' (LIKE ... INCLUDING ALL), or its
 * primary key alone (what a task row would cost if nothing else looked it up).
 */
export type FloorIndexes = 'kiln-indexes' | 'primary-key';

export interface DurableFloorRun {
  indexes: FloorIndexes;
  images: number;
  groupSize: number;
  wallSec: number;
  tasksPerSec: number;
  /** PostgreSQL's CPU (backends, WAL writer, checkpointer, background writer) per task. */
  postgresMsPerTask: number;
  /** The bench process driving it (node-postgres), per task. */
  clientMsPerTask: number;
  window: WindowFigures;
}

/** Tasks per INSERT, as the api writes a batch. */
const INSERT_SIZE = 100;
/** Connections writing at once, as the pipeline's 4 accounts and the generator's pool do. */
export const FLOOR_WRITERS = 4;
/** Tasks per take and per end: about twice what a generator of 50 workers gathers (see below). */
export const FLOOR_GROUP_SIZE = 25;

/*
 * Three row versions per task, each in its own transaction, as a durable pipeline with a row
 * per task needs at the least: the row written with its batch (the api's INSERT of 100, with
 * the foreign key to batches checked per row), taken by a worker just before its upstream
 * call (what a crash must find to never pay twice) and ended with its result. Kiln's own
 * statements do these and more (the batch tallies and versions in the same statements, the
 * feeder's `pending -> queued` for tasks the api leaves to it); groups of FLOOR_GROUP_SIZE tasks are
 * about twice what a generator of 50 workers gathers (12.3 per statement in the 2026-11-27
 * count, bench/findings.md), so this floor flatters the design it measures.
 */
const INSERT_SQL = (table: string) => `
INSERT INTO ${table} (id, batch_id, account_id, seq, prompt, ref_upload_ids, seed, status, tier)
SELECT t.id, $1, $2, t.seq, $3, '{}'::uuid[], t.seed, 'queued', 'standard'
  FROM unnest($4::uuid[], $5::int[], $6::int[]) AS t(id, seq, seed)`;

const TAKE_SQL = (table: string) => `
UPDATE ${table} t SET status = 'running', attempts = t.attempts + 1, progress = 1, sent_at = now(),
       started_at = COALESCE(t.started_at, now()), updated_at = now(), result_token = COALESCE(t.result_token, i.token)
  FROM unnest($1::uuid[], $2::text[]) AS i(id, token)
 WHERE t.id = i.id AND t.status = 'queued'`;

const END_SQL = (table: string) => `
UPDATE ${table} t SET status = 'succeeded', progress = 100, result_url = 'http://127.0.0.1/files/' || i.key, result_key = i.key,
       result_width = 64, result_height = 64, finished_at = now(), updated_at = now()
  FROM unnest($1::uuid[], $2::text[]) AS i(id, key)
 WHERE t.id = i.id AND t.status = 'running'`;

/**
 * The least PostgreSQL must do for `images` durable tasks with a row each (see above), on a
 * scratch copy of Kiln's `tasks` table in the bench's database, with no Kiln process, queue or
 * file involved. Kiln's PostgreSQL CPU per task over this says what Kiln's statements add, and
 * the floor at other group sizes what statements per task cost (bench/findings.md, 2026-11-27).
 */
export async function runDurableFloor(
  stack: KilnStack,
  images: number,
  indexes: FloorIndexes,
  groupSize = FLOOR_GROUP_SIZE,
): Promise<DurableFloorRun> {
  const table = `bench_floor_${indexes.replace('-', '_')}`;
  const pool = new Pool({ connectionString: stack.databaseUrl, max: FLOOR_WRITERS });
  try {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.query(
      indexes === 'kiln-indexes'
        ? `CREATE TABLE ${table} (LIKE tasks INCLUDING ALL)`
        : `CREATE TABLE ${table} (LIKE tasks INCLUDING DEFAULTS INCLUDING CONSTRAINTS); ALTER TABLE ${table} ADD PRIMARY KEY (id)`,
    );
    await pool.query(`ALTER TABLE ${table} ADD FOREIGN KEY (batch_id) REFERENCES batches(id) ON DELETE CASCADE`);
    const { rows } = await pool.query<{ id: string; account_id: string }>(`SELECT id, account_id FROM batches ORDER BY created_at LIMIT 1`);
    if (!rows[0]) throw new Error('the durable floor needs one batch in the bench database');
    const { id: batchId, account_id: accountId } = rows[0];

    const inserts = chunks(images, INSERT_SIZE);
    let next = 0;
    let seqBase = 0;
    const measured = await measureWindow(stack, {});
    const t0 = Date.now();
    try {
      await Promise.all(
        Array.from({ length: FLOOR_WRITERS }, async () => {
          while (next < inserts.length) {
            const size = inserts[next++];
            const first = seqBase;
            seqBase += size;
            const ids = Array.from({ length: size }, () => randomUUID());
            await pool.query(INSERT_SQL(table), [
              batchId,
              accountId,
              'a lighthouse on a cliff at dusk, oil painting',
              ids,
              ids.map((_, i) => first + i),
              ids.map(() => Math.floor(Math.random() * 2 ** 31)),
            ]);
            for (let g = 0; g < ids.length; g += groupSize) {
              const group = ids.slice(g, g + groupSize);
              await pool.query(TAKE_SQL(table), [group, group.map(() => randomBytes(16).toString('hex'))]);
              await pool.query(END_SQL(table), [group, group.map((id) => `results/${id}/kiln-floor.png`)]);
            }
          }
        }),
      );
      const wallSec = (Date.now() - t0) / 1000;
      const window = await measured();
      const tasksPerSec = images / wallSec;
      return {
        indexes,
        images,
        groupSize,
        wallSec: round(wallSec, 2),
        tasksPerSec: round(tasksPerSec, 0),
        postgresMsPerTask: round((window.postgresCores / tasksPerSec) * 1000, 3),
        clientMsPerTask: round((window.benchCores / tasksPerSec) * 1000, 3),
        window,
      };
    } finally {
      await measured();
    }
  } finally {
    await pool.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await pool.end();
  }
}
