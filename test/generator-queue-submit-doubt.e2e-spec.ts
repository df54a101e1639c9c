import { ProviderRoute } from '@app/database';
import {
  FakeQueueUpstream,
  fakeQueueUpstream,
  QueueTypeName,
  batchRow,
  createBatchVia,
  refundRows,
  taskRows,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { QUEUE_CHILD_ENV, useGeneratorProcesses } from './helpers/apps';

const MODEL: Record<QueueTypeName, string> = {
  fal: 'fal-ai/flux/schnell',
  replicate: 'black-forest-labs/flux-schnell',
  bfl: 'flux-pro-1.1',
};

jest.setTimeout(120_000);

/** Tasks a case submits at once: every one is in flight (taken upstream, answer held) at the kill. */
const TASKS = 4;

/**
 * The submit's answer held 5 s by the upstream and the generator SIGKILLed meanwhile: every
 * task's intent is committed and no request id recorded. The next generator finds each
 * request upstream where the type can (Replicate's listing: one submit per task), else does
 * what the route's onUnknownSubmit says: `resubmit` (two submits per task, every image made)
 * or `fail` (one submit, every task failed and refunded). The money stays exact either way.
 */
describe('generator process: a submit in flight at a crash (intent, lookup, onUnknownSubmit)', () => {
  const kiln = useGeneratorProcesses('gen_submit_doubt', {
    childEnv: QUEUE_CHILD_ENV,
    overrides: (base) => ({ upstream: { ...base.upstream, allowPrivate: true } }),
  });

  async function moneyExact(accountId: string): Promise<void> {
    const balance = await kiln.api.db.query<{ balance: string; ledger: string }[]>(
      `SELECT a.balance::bigint AS balance, (SELECT COALESCE(sum(amount), 0)::bigint FROM ledger_entries l WHERE l.account_id = a.id) AS ledger
         FROM accounts a WHERE a.id = $1`,
      [accountId],
    );
    const [row] = balance;
    expect(row.balance).toBe(row.ledger);
  }

  it.each([
    ['replicate', 'resubmit', 1],
    ['replicate', 'fail', 1],
    ['fal', 'resubmit', 2],
    ['fal', 'fail', 1],
    ['bfl', 'resubmit', 2],
    ['bfl', 'fail', 1],
  ] as const)('%s, onUnknownSubmit %s: %d submit(s) per task', (dialect, onUnknownSubmit, submitsPerTask) =>
    kiln.withOutput(async () => {
      const fake: FakeQueueUpstream = fakeQueueUpstream(dialect, {
        queueMs: 300,
        holdSubmitAnswerMs: 5000,
        imageSize: { width: 64, height: 64 },
      });
      await fake.start();
      try {
        const a = await kiln.api.account({ plan: 'scale', credits: 10_000 });
        const route = {
          preset: `${dialect}/${MODEL[dialect]}`,
          baseUrl: fake.baseUrl,
          pollIntervalMs: 200,
          maxConcurrency: TASKS,
          onUnknownSubmit,
        } as unknown as ProviderRoute;
        const prompts = Array.from({ length: TASKS }, (_, i) => `${dialect} ${onUnknownSubmit} doubt ${i}`);
        const id = await createBatchVia(kiln.api, a, 'eta-image', route, { prompts });

        const first = kiln.start();
        await waitFor(`${TASKS} submits taken upstream`, () => Promise.resolve(fake.submits === TASKS), 60_000, 20);
        expect((await kiln.kill(first, 'SIGKILL')).signal).toBe('SIGKILL');
        const inDoubt = await taskRows(kiln.api, id);
        expect(inDoubt.every((t) => t.upstream_request_id === null && t.submit_intent_at !== null)).toBe(true);

        const second = kiln.start();
        await waitForBatchDone(kiln.api, id, 90_000);
        expect((await kiln.kill(second, 'SIGTERM')).code).toBe(0);

        for (const p of prompts) expect(fake.submitsFor(p)).toBe(submitsPerTask);
        const tasks = await taskRows(kiln.api, id);
        const made = dialect === 'replicate' || onUnknownSubmit === 'resubmit';
        expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => (made ? 'succeeded' : 'failed')));
        expect(await refundRows(kiln.api, id)).toHaveLength(made ? 0 : TASKS);
        expect(await batchRow(kiln.api, id)).toMatchObject({ succeeded_count: made ? TASKS : 0 });
        await moneyExact(a.id);
      } finally {
        await fake.stop();
      }
    }),
  );
});
