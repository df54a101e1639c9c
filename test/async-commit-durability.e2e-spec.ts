import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { buildConfig } from '@app/config';
import { createDataSource, runMigrations, sessionStartupOptions } from '@app/database';
import { BatchChangePublisher, SubmitIntentStore, UpstreamCancelSignal, UpstreamWaitStore } from '@app/tasks';
import { newEvent, SecretBox, WebhookOutbox, WebhookSender } from '@app/webhooks';
import { PrivatePostgres } from '../bench/chaos/services';
import { freePort } from '../bench/lib/kiln';
import { WebhookReceiver } from './helpers/webhook-receiver';

jest.setTimeout(120_000);

/**
 * The generator's sessions commit asynchronously (DatabaseModuleOptions.asyncCommit): a commit
 * is visible to other sessions before its WAL is on disk, and a crash of PostgreSQL may undo
 * it. That is safe for the task writes (fenced: the reconciler runs an undone task again), not
 * for what leaves Kiln for good on the strength of a write: a webhook sent (the change it
 * reports is made again and reported under a second webhook-id: the chaos run's batch completed
 * under two), or a queue upstream's request id (lost, the task would submit, and be billed,
 * again). Against a PostgreSQL of the test's own, which writes the WAL out only when a commit
 * asks for it, crashed (immediate shutdown) right after each.
 */
describe('what leaves Kiln on a generator write survives a crash of PostgreSQL', () => {
  let dir: string;
  let pg: PrivatePostgres;
  let url: string;
  let receiver: WebhookReceiver;
  const sources: DataSource[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-durable-'));
    // The postgres user (when run as root) reaches its data directory through this one.
    fs.chmodSync(dir, 0o755);
    pg = new PrivatePostgres(path.join(__dirname, '..'), await freePort(), path.join(dir, 'pg'), path.join(dir, 'postgres.log'));
    pg.initialise();
    // No WAL of an asynchronous commit is written out on its own within the test: the WAL
    // writer wakes every 10 s (the most it allows; it hibernates only after 50 idle rounds),
    // the background writer writes no pages (each would flush the WAL first), no autovacuum.
    fs.appendFileSync(path.join(dir, 'pg', 'postgresql.conf'), '\nwal_writer_delay = 10s\nbgwriter_lru_maxpages = 0\nautovacuum = off\n');
    await pg.start();
    const admin = new Client({ connectionString: pg.url });
    await admin.connect();
    await admin.query('CREATE DATABASE kiln');
    await admin.end();
    url = pg.url.replace(/\/postgres$/, '/kiln');
    await runMigrations(url);
    receiver = await new WebhookReceiver().listen();
  });

  afterAll(async () => {
    for (const s of sources) if (s.isInitialized) await s.destroy().catch(() => undefined);
    await receiver?.close();
    await pg?.shutdown();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** PostgreSQL crashes (immediate shutdown: no checkpoint, WAL buffers not written) with the sessions open, and recovers. */
  async function crash(): Promise<void> {
    pg.signal('SIGQUIT');
    expect(await pg.waitExit(10_000)).toBe(true);
    for (const s of sources.splice(0)) await s.destroy().catch(() => undefined);
    await pg.start();
  }

  async function connect(asyncCommit: boolean): Promise<DataSource> {
    const options = sessionStartupOptions({ asyncCommit });
    const ds = createDataSource(url, { extra: { max: 2, ...(options ? { options } : {}) } });
    sources.push(ds);
    return ds.initialize();
  }

  it('the delivery of an event the receiver got is still in the outbox after the crash', async () => {
    // The api's sessions (synchronous commits): an account and its endpoint, on disk.
    const api = await connect(false);
    const [account] = await api.query(
      `INSERT INTO accounts (email, plan_key) VALUES ('durable@example.test', (SELECT key FROM plans ORDER BY key LIMIT 1)) RETURNING id`,
    );
    const box = new SecretBox(Buffer.alloc(32, 7));
    const endpointId = randomUUID();
    await api.query(`INSERT INTO webhook_endpoints (id, account_id, url, events, secret_enc) VALUES ($1, $2, $3, $4, $5)`, [
      endpointId,
      account.id,
      receiver.url('/durable'),
      ['batch.completed'],
      box.seal(`whsec_${Buffer.alloc(24, 1).toString('base64')}`, endpointId),
    ]);

    // The generator's (asynchronous commits, as GENERATOR_SESSIONS): the event written in the
    // transaction of the change it reports, then sent by the generator's sender.
    const gen = await connect(true);
    expect(await gen.query('SHOW synchronous_commit')).toEqual([{ synchronous_commit: 'off' }]);
    const event = newEvent(account.id, 'batch.completed', { id: randomUUID(), object: 'batch' });
    await gen.transaction((m) => new WebhookOutbox().insert(m, [event]));
    const config = buildConfig(process.env);
    const sender = new WebhookSender(gen, { ...config, webhooks: { ...config.webhooks, allowPrivate: true } }, box);
    expect(await sender.deliverDue()).toBe(1);
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([event.id]);

    await crash();

    const after = await connect(false);
    // Gone, the event would have reported a change that is undone, and whose remake (the task run
    // again, its batch finished again) is reported under another webhook-id.
    expect(await after.query(`SELECT event_id FROM webhook_deliveries WHERE event_id = $1`, [event.id])).toEqual([{ event_id: event.id }]);
  });

  /** A running task (attempt 1) of a one-image batch, written by a synchronous session. */
  async function runningTask(api: DataSource, email: string): Promise<{ taskId: string; batchId: string }> {
    const [{ id: accountId }] = await api.query(
      `INSERT INTO accounts (email, plan_key) VALUES ($1, (SELECT key FROM plans ORDER BY key LIMIT 1)) RETURNING id`,
      [email],
    );
    const [{ key: model, provider }] = await api.query(`SELECT key, provider FROM models ORDER BY sort_order LIMIT 1`);
    const [{ id: batchId }] = await api.query(
      `INSERT INTO batches (account_id, prompts, model, aspect_ratio, resolution, quality, count_per_combo, ref_mode, ref_images,
                            total, unit_cost, credits_charged, provider, width, height, created_via_api, status)
       VALUES ($1, '["a kiln"]', $2, '1:1', '1K', 'auto', 1, 'none', '[]', 1, 1, 1, $3, 1024, 1024, true, 'running') RETURNING id`,
      [accountId, model, provider],
    );
    const [{ id: taskId }] = await api.query(
      `INSERT INTO tasks (batch_id, account_id, seq, prompt, seed, status, attempts) VALUES ($1, $2, 0, 'a kiln', 1, 'running', 1) RETURNING id`,
      [batchId, accountId],
    );
    return { taskId, batchId };
  }

  it('submit intents recorded together (one grouped statement) are all still there after the crash', async () => {
    const api = await connect(false);
    const tasks = [await runningTask(api, 'intents-1@example.test'), await runningTask(api, 'intents-2@example.test')];
    const intents = new SubmitIntentStore(await connect(true));
    // Asked in the same tick: one group, one statement and one commit; each answer is the
    // go-ahead for its upstream call, so it must come after the flush.
    const recorded = await Promise.all([
      ...tasks.map(({ taskId, batchId }, i) => intents.record({ taskId, attempt: 1, batchId }, { prompt: `kiln ${i}` })),
      // An attempt the task is not at (taken over since): refused in the same group, nothing written.
      intents.record({ ...tasks[0], attempt: 2 }, { prompt: 'taken over' }),
    ]);
    expect(recorded).toEqual([expect.any(String), expect.any(String), null]);

    await crash();

    const after = await connect(false);
    const rows = await after.query(`SELECT id, submit_intent FROM tasks WHERE id = ANY($1::uuid[]) AND submit_intent_at IS NOT NULL`, [
      tasks.map((t) => t.taskId),
    ]);
    expect(new Map(rows.map((r: { id: string; submit_intent: unknown }) => [r.id, r.submit_intent]))).toEqual(
      new Map(tasks.map((t, i) => [t.taskId, { prompt: `kiln ${i}` }])),
    );
  });

  it("a submit intent cleared by the upstream's refusal stays cleared after the crash (a fail route must not fail the task for it)", async () => {
    const { taskId, batchId } = await runningTask(await connect(false), 'intent@example.test');
    const intents = new SubmitIntentStore(await connect(true));
    const fence = { taskId, attempt: 1, batchId };
    expect(await intents.record(fence, { prompt: 'a kiln' })).toEqual(expect.any(String));
    await intents.clear(fence);

    await crash();

    const after = await connect(false);
    expect(await after.query(`SELECT submit_intent_at FROM tasks WHERE id = $1`, [taskId])).toEqual([{ submit_intent_at: null }]);
  });

  it("a queue upstream's request id, recorded as its submit answered, is still there after the crash", async () => {
    const { taskId, batchId } = await runningTask(await connect(false), 'submit@example.test');

    // The generator records the upstream's answer (asynchronous session), then would wait on it.
    const gen = await connect(true);
    // Announcements go to Redis, which this test has none of: hints for pollers, not what must survive.
    const publisher = { announce: () => undefined, announceFinished: () => undefined } as unknown as BatchChangePublisher;
    const signal = { signal: () => undefined } as unknown as UpstreamCancelSignal;
    const recorded = await new UpstreamWaitStore(gen, publisher, signal).recordSubmission({
      fence: { taskId, attempt: 1, batchId },
      requestId: 'req-paid-once',
      handle: { statusUrl: 'http://upstream.test/req-paid-once' },
      hold: { poller: null, leaseMs: 30_000, pollAt: new Date() },
    });
    expect(recorded).toBe(true);

    await crash();

    const after = await connect(false);
    expect(await after.query(`SELECT upstream_request_id FROM tasks WHERE id = $1`, [taskId])).toEqual([
      { upstream_request_id: 'req-paid-once' },
    ]);
  });
});
