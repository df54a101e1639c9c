import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { BillingService } from '@app/billing';
import { createDataSource, runMigrations, sessionStartupOptions } from '@app/database';
import { BatchChangePublisher, Fence, TaskStateStore } from '@app/tasks';
import { GENERATOR_SESSIONS } from '../apps/generator/src/generator.module';

/**
 * The generator's grouped task writes find their tasks by primary key, whatever PostgreSQL's
 * statistics say and whenever their plans were made. Two ways they once read every unfinished
 * task (or the whole table) to write a dozen, both on a `tasks` table never analyzed (autovacuum
 * off, a fresh restore, a burst of inserts before autoanalyze reaches it):
 * - a status test that matched a partial index on status, which a table without statistics
 *   made look cheap: 26 ms a claim with 10,000 tasks queued (statusIs);
 * - a plan made while the table was small, a sequential scan, kept for good after five runs of
 *   the prepared statement, since only an ANALYZE makes PostgreSQL plan it again: the economy
 *   scenario took twice as long (DatabaseModuleOptions.customPlans).
 * bench/findings.md, 2026-11-27 session 3.
 *
 * The statements run through TaskStateStore in sessions set up as the generator's, first many
 * times on a small table, then on a database of this file's own whose `tasks` holds 5,000
 * unfinished tasks and no statistics; auto_explain, loaded into the session, sends each
 * statement's executed plan back as a notice.
 */
describe('task writes on a tasks table without statistics', () => {
  /** Tasks added after the warm-up: 4,000 queued and 1,000 running, 250 to a batch. */
  const UNFINISHED = 5_000;
  const GROUP = 16;
  const adminUrl = process.env.KILN_TEST_ADMIN_URL as string;
  const dbName = `${process.env.KILN_TEST_DB_NAME}_plans`.slice(0, 63);
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  let ds: DataSource;
  let store: TaskStateStore;
  const plans: ExecutedPlan[] = [];

  async function admin<T>(fn: (c: Client) => Promise<T>, connectionString = adminUrl): Promise<T> {
    const c = new Client({ connectionString });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }

  beforeAll(async () => {
    await admin(async (c) => {
      await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      await c.query(`CREATE DATABASE "${dbName}"`);
    });
    await runMigrations(url.toString());
    await admin(async (c) => {
      // No statistics, whatever the server's autovacuum does meanwhile.
      await c.query(`ALTER TABLE tasks SET (autovacuum_enabled = false)`);
      await c.query(`ALTER TABLE batches SET (autovacuum_enabled = false)`);
      const [{ id: accountId }] = (
        await c.query(`INSERT INTO accounts (email, plan_key, balance) VALUES ('plans@example.com', 'free', 100000) RETURNING id`)
      ).rows;
      const [{ key: model, provider }] = (await c.query(`SELECT key, provider FROM models ORDER BY sort_order LIMIT 1`)).rows;
      await c.query(
        `INSERT INTO batches (account_id, prompts, model, aspect_ratio, resolution, quality, count_per_combo, ref_mode, ref_images,
                              total, unit_cost, credits_charged, provider, width, height, created_via_api, status)
         SELECT $1, '["a kiln"]', $2, '1:1', '1K', 'auto', 250, 'none', '[]', 250, 1, 250, $3, 1024, 1024, true, 'running'
           FROM generate_series(1, ${UNFINISHED / 250})`,
        [accountId, model, provider],
      );
      // The warm-up's tasks: a table of a few pages, as on a fresh install.
      await c.query(
        `INSERT INTO tasks (batch_id, account_id, seq, prompt, seed, status)
         SELECT b.id, b.account_id, s, 'a kiln', s, 'queued' FROM batches b, generate_series(1001, 1002) s`,
      );
    }, url.toString());

    ds = createDataSource(url.toString(), {
      extra: {
        max: 1,
        // The generator's session settings, and auto_explain.
        options: [
          sessionStartupOptions(GENERATOR_SESSIONS),
          ...[
            'session_preload_libraries=auto_explain',
            'auto_explain.log_min_duration=0',
            'auto_explain.log_analyze=on',
            'auto_explain.log_timing=off',
            'auto_explain.log_format=json',
            'auto_explain.log_level=notice',
          ].map((o) => `-c ${o}`),
        ].join(' '),
      },
    });
    await ds.initialize();
    const seen = new WeakSet<object>();
    (ds.driver as unknown as { master: NodeJS.EventEmitter }).master.on('acquire', (client: NodeJS.EventEmitter) => {
      if (seen.has(client)) return;
      seen.add(client);
      client.on('notice', (n: { message?: string }) => {
        const plan = executedPlanOf(n.message ?? '');
        if (plan) plans.push(plan);
      });
    });
    const announcements = { announce: () => undefined, announceFinished: () => undefined } as unknown as BatchChangePublisher;
    store = new TaskStateStore(ds, new BillingService(ds), announcements);
  });

  afterAll(async () => {
    await ds?.destroy();
    await admin((c) => c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`));
  });

  /** The tasks rows each statement of `run` read (found by its scans, before filters). */
  async function tasksRowsRead(run: () => Promise<unknown>): Promise<{ text: string; rows: number }[]> {
    plans.length = 0;
    await run();
    return plans.filter((p) => p.tasksRows > 0).map((p) => ({ text: p.text.trim().slice(0, 80), rows: p.tasksRows }));
  }

  /** One round of the writes a generator makes for `tasks` (ids and batches), the claim alone for `alone`. */
  async function writeRound(
    tasks: { id: string; batch_id: string }[],
    alone: { id: string }[],
  ): Promise<Record<string, { text: string; rows: number }[]>> {
    const claimed = await tasksRowsRead(() => Promise.all(tasks.map((t) => store.claimAndSend(t.id, t.batch_id))));
    // The claim alone: a worker still waiting for its slot.
    const claimedAlone = await tasksRowsRead(() => Promise.all(alone.map((t) => store.claim(t.id))));
    const fences: Fence[] = tasks.map((t) => ({ taskId: t.id, attempt: 1, batchId: t.batch_id }));
    const progressed = await tasksRowsRead(() => Promise.all(fences.map((f) => store.reportProgress(f, 50))));
    const half = Math.floor(tasks.length / 2);
    const succeeded = await tasksRowsRead(() =>
      Promise.all(
        fences.slice(0, half).map((fence) =>
          store.succeed({
            fence,
            batchId: fence.batchId,
            resultUrl: `http://x/${fence.taskId}.png`,
            resultKey: `${fence.taskId}.png`,
            width: 8,
            height: 8,
            previewUrl: null,
          }),
        ),
      ),
    );
    const failed = await tasksRowsRead(() =>
      store.failMany(fences.slice(half).map((fence) => ({ fence, message: 'no', code: 'internal' }))),
    );
    return { claimed, claimedAlone, progressed, succeeded, failed };
  }

  it('claims, sends, reports progress, succeeds and fails a group reading its own rows, not the queue', async () => {
    // Plans made on a small table first: eight rounds, more than the five runs after which
    // PostgreSQL may keep a prepared statement's plan for good.
    const warmUp = await ds.query(`SELECT id, batch_id FROM tasks WHERE seq > 1000 ORDER BY seq, batch_id`);
    for (let round = 0; round < 8; round++)
      await writeRound(warmUp.slice(round * 5, round * 5 + 4), warmUp.slice(round * 5 + 4, round * 5 + 5));
    await admin(async (c) => {
      await c.query(
        `INSERT INTO tasks (batch_id, account_id, seq, prompt, seed, status)
         SELECT b.id, b.account_id, s, 'a kiln', s, 'queued' FROM batches b, generate_series(1, 250) s`,
      );
      // Others' tasks in flight too (an economy batch has thousands running): a write fenced on
      // `running` must not read them either.
      await c.query(`UPDATE tasks SET status = 'running', attempts = 1, started_at = now() WHERE seq BETWEEN 201 AND 250`);
    }, url.toString());

    // One task of each of 16 batches, as a busy generator's group is; the claim alone for their seconds.
    const picked = await ds.query(`SELECT DISTINCT ON (batch_id) id, batch_id FROM tasks ORDER BY batch_id, seq LIMIT ${GROUP}`);
    const others = await ds.query(`SELECT id FROM tasks WHERE seq = 2 ORDER BY batch_id LIMIT ${GROUP}`);
    // Statistics absent: the condition this spec is about (a run where autoanalyze got there first proves nothing).
    const [{ analyzed }] = await ds.query(`SELECT count(*)::int AS analyzed FROM pg_stats WHERE tablename = 'tasks'`);
    expect(analyzed).toBe(0);

    const stages = await writeRound(picked, others);

    // The writes happened (so the plans below are of real work, not of statements that found nothing).
    const { rows } = await admin(
      (c) => c.query(`SELECT status, count(*)::int AS n FROM tasks WHERE id = ANY($1) GROUP BY status`, [picked.map((t: any) => t.id)]),
      url.toString(),
    );
    expect(Object.fromEntries(rows.map((r) => [r.status, r.n]))).toEqual({ succeeded: GROUP / 2, failed: GROUP / 2 });

    for (const [stage, statements] of Object.entries(stages))
      expect({ stage, planned: statements.length > 0 }).toEqual({ stage, planned: true });
    // A PK lookup reads the group's rows (and a few a fence filters out); a scan of the queue reads thousands.
    const heavy = Object.entries(stages).flatMap(([stage, statements]) =>
      statements.filter((s) => s.rows > 4 * GROUP).map((s) => ({ stage, ...s })),
    );
    expect(heavy).toEqual([]);
  });
});

interface ExecutedPlan {
  text: string;
  /** Rows of `tasks` its scans produced or removed by a filter, over all their loops. */
  tasksRows: number;
}

/** An auto_explain notice ("duration: … plan:" and its JSON) as the rows it read from tasks. */
function executedPlanOf(message: string): ExecutedPlan | null {
  const start = message.indexOf('{');
  if (start < 0) return null;
  const explained = JSON.parse(message.slice(start)) as { 'Query Text': string; Plan: PlanNode };
  return { text: explained['Query Text'], tasksRows: rowsOf(explained.Plan) };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function rowsOf(node: PlanNode): number {
  // Scans only: the Update node above them names tasks too, with the rows it wrote.
  const scan = node['Node Type'].endsWith('Scan') && node['Relation Name'] === 'tasks';
  const here = scan
    ? ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) *
      (node['Actual Loops'] ?? 1)
    : 0;
  return here + (node.Plans ?? []).reduce((sum, child) => sum + rowsOf(child), 0);
}
