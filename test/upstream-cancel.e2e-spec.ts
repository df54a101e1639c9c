import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildConfig, KilnConfig } from '@app/config';
import { KilnMetrics } from '@app/metrics';
import { ProviderRoute } from '@app/database';
import {
  bearer,
  createBatchVia,
  FakeQueueUpstream,
  fakeQueueUpstream,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

type CancelType = 'fal' | 'replicate';
const MODEL: Record<CancelType, string> = { fal: 'fal-ai/flux/dev', replicate: 'black-forest-labs/flux-schnell' };

jest.setTimeout(120_000);

/**
 * A batch cancel reaches fal's and Replicate's queues: the api marks the accepted tasks, a
 * generator asks the upstream once per task, and a task is refunded when the upstream
 * confirms it did not run; one that ran is charged. The fakes hold every request in their
 * queue (as a busy upstream does) unless its prompt says [running].
 */
describe('batch cancel reaches the queue upstream (fal, Replicate)', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;
  const fakes = {} as Record<CancelType, FakeQueueUpstream>;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-upstream-cancel-'));

  const route = (type: CancelType, extra: Record<string, unknown> = {}): ProviderRoute =>
    ({ preset: `${type}/${MODEL[type]}`, baseUrl: fakes[type].baseUrl, pollIntervalMs: 100, ...extra }) as unknown as ProviderRoute;

  const cancel = async (a: TestAccount, id: string) =>
    (await api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a)).expect(200)).body;

  /** Money exact: the balance is the ledger's sum, and is what the account started with less `charged`. */
  const expectMoney = async (a: TestAccount, start: number, charged: number) => {
    expect(await api.balance(a.id)).toBe(start - charged);
    expect(await api.ledgerSum(a.id)).toBe(start - charged);
  };

  const requestIds = async (batchId: string): Promise<string[]> =>
    (await taskRows(api, batchId)).map((t) => t.upstream_request_id as string | null).filter((r): r is string => r !== null);

  beforeAll(async () => {
    for (const type of ['fal', 'replicate'] as const) {
      fakes[type] = fakeQueueUpstream(type, { queueMs: 300, holdInQueue: true });
      await fakes[type].start();
    }
    const base = buildConfig(process.env);
    env = await fileEnvironment('upstream_cancel', {
      upstream: { ...base.upstream, allowPrivate: true },
      storage: { ...base.storage, dataDir },
      providerApiKeys: { FAL_KEY: 'fal-test-key:secret', REPLICATE_API_TOKEN: 'r8_testtoken' },
      generator: { concurrency: 8, maxAttempts: 3, backoffMs: 50, reconcileIntervalMs: 600_000 },
    });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    for (const fake of Object.values(fakes)) await fake?.stop();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  describe.each(['fal', 'replicate'] as const)('%s', (type) => {
    const fake = () => fakes[type];
    const cancelsOf = (ids: string[]) => fake().cancels.filter((c) => ids.includes(c.id));

    it('a 20-image batch cancelled right after creation: every task refunded, each accepted request cancelled upstream once', async () => {
      const start = 10_000;
      const a = await api.account({ plan: 'scale', credits: start });
      const prompts = Array.from({ length: 20 }, (_, i) => `${type} held ${i}`);
      const id = await createBatchVia(api, a, 'alpha-image-2-5', route(type), { prompts });
      const charged = start - (await api.balance(a.id));
      // As a client would, a moment after creation: the first requests are in fal's queue by then.
      await waitFor('the first requests accepted', async () => (await requestIds(id)).length >= 4, 10_000, 20);

      const answer = await cancel(a, id);
      // Tasks not yet accepted upstream are cancelled at once; accepted ones are asked of it.
      expect(answer.counts.cancelled + answer.counts.running).toBe(20);
      expect(answer.counts.cancelling).toBeLessThanOrEqual(answer.counts.running);

      await waitForBatchDone(api, id);
      const { batch, tasks } = await getBatch(api, a, id);
      expect(batch).toMatchObject({ status: 'cancelled', done: true, creditsRefunded: charged });
      expect(batch.counts).toEqual({ pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 20, cancelling: 0 });
      expect(tasks.every((t) => t.status === 'cancelled' && t.cancelling === false)).toBe(true);

      // Every request the fake took was asked to cancel exactly once, while still in its queue.
      const accepted = await requestIds(id);
      expect(accepted.length).toBeGreaterThanOrEqual(4);
      expect(fake().submits).toBeGreaterThanOrEqual(accepted.length);
      const asked = cancelsOf(accepted);
      expect(asked.map((c) => c.id).sort()).toEqual([...accepted].sort());
      expect(asked.every((c) => c.stage === 'queued')).toBe(true);
      await expectMoney(a, start, 0);
    });

    it('a request already made upstream is charged; the one still queued is refunded', async () => {
      const start = 1_000;
      const a = await api.account({ plan: 'scale', credits: start });
      // Polled late, so the cancel finds the [running] request made but not yet collected.
      const id = await createBatchVia(api, a, 'alpha-image-2-5', route(type, { pollIntervalMs: 3000 }), {
        prompts: [`${type} [running] made`, `${type} held queued`],
      });
      const charged = start - (await api.balance(a.id));
      const accepted = await waitFor('both requests accepted', async () => {
        const ids = await requestIds(id);
        return ids.length === 2 ? ids : null;
      });
      await waitFor('the [running] request made upstream', () =>
        [...fake().stages().entries()].some(([r, s]) => accepted.includes(r) && s === 'done'),
      );

      const answer = await cancel(a, id);
      expect(answer.counts).toMatchObject({ pending: 0, succeeded: 0, cancelled: 0 });
      expect(answer.counts.running).toBe(2);

      await waitForBatchDone(api, id);
      const { batch, tasks } = await getBatch(api, a, id);
      expect(batch).toMatchObject({ status: 'cancelled', creditsRefunded: charged / 2 });
      expect(batch.counts).toMatchObject({ succeeded: 1, cancelled: 1, cancelling: 0 });
      const made = tasks.find((t) => t.prompt.includes('[running]'));
      expect(made).toMatchObject({ status: 'succeeded', cancelling: false });
      expect(made.resultUrls).toHaveLength(1);
      expect(
        cancelsOf(accepted)
          .map((c) => c.stage)
          .sort(),
      ).toEqual(['done', 'queued']);
      const counted = await gen.get(KilnMetrics).upstreamCancels.get();
      const outcomes = counted.values.filter((v) => v.labels.provider === type).map((v) => v.labels.outcome);
      expect(outcomes).toEqual(expect.arrayContaining(['cancelled', 'runs']));
      await expectMoney(a, start, charged / 2);
    });
  });

  it("a cancel asked while no generator runs is sent by the next one, once per task (again only after a dead sender's lease), and refunded once", async () => {
    const start = 1_000;
    const a = await api.account({ plan: 'scale', credits: start });
    const id = await createBatchVia(api, a, 'alpha-image-2-5', route('fal'), {
      prompts: ['fal restart 1', 'fal restart 2', 'fal restart 3'],
    });
    const accepted = await waitFor('the three requests accepted', async () => {
      const ids = await requestIds(id);
      return ids.length === 3 ? ids : null;
    });
    await gen.close();

    // The api only marks the cancel: with no generator, all three wait as `cancelling`.
    const answer = await cancel(a, id);
    expect(answer.counts).toEqual({ pending: 0, running: 3, succeeded: 0, failed: 0, cancelled: 0, cancelling: 3 });
    const during = await getBatch(api, a, id);
    expect(during.tasks.map((t) => [t.status, t.cancelling])).toEqual([
      ['running', true],
      ['running', true],
      ['running', true],
    ]);
    expect(fakes.fal.cancels.filter((c) => accepted.includes(c.id))).toEqual([]);
    // Cancelling again changes nothing (and asks nothing more).
    expect((await cancel(a, id)).counts.cancelling).toBe(3);
    // One as a sender that died during its call leaves it: taken, its lease running 2 s more.
    const [dead] = await api.db.query(
      `UPDATE tasks SET upstream_cancel = 'sending', upstream_cancel_at = now() + interval '2 seconds'
        WHERE id = (SELECT id FROM tasks WHERE batch_id = $1 ORDER BY seq LIMIT 1) RETURNING upstream_request_id`,
      [id],
    );

    gen = await bootGenerator(config);
    await waitFor('the two free cancels sent', () => fakes.fal.cancels.filter((c) => accepted.includes(c.id)).length === 2);
    expect(fakes.fal.cancels.map((c) => c.id)).not.toContain(dead.upstream_request_id);
    await waitForBatchDone(api, id);
    const { batch } = await getBatch(api, a, id);
    expect(batch.counts).toEqual({ pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 3, cancelling: 0 });
    const asked = fakes.fal.cancels.filter((c) => accepted.includes(c.id));
    expect(asked.map((c) => c.id).sort()).toEqual([...accepted].sort());
    await expectMoney(a, start, 0);
    const refunds = await api.db.query(`SELECT kind, amount FROM ledger_entries WHERE batch_id = $1 AND kind <> 'batch_charge'`, [id]);
    expect(refunds.map((r: { kind: string }) => r.kind)).toEqual(['cancel_refund', 'cancel_refund', 'cancel_refund']);
  });
});
