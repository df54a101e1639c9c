import * as fs from 'node:fs';
import * as path from 'node:path';
import { ProviderRoute } from '@app/database';
import { createBatch, TestAccount, TestApp } from '@app/testing';

/** A simulated route with its local batch API enabled; short intervals for tests. */
export function simulatedBatchRoute(batch: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): ProviderRoute {
  return {
    type: 'simulated',
    batch: { enabled: true, collectMs: 0, maxRequests: 1000, pollIntervalMs: 100, delayMs: 200, ...batch },
    ...extra,
  } as unknown as ProviderRoute;
}

/**
 * An economy batch, created through the API (`tier: "economy"`) on a model the admin API
 * routes to `route` with economy prices (`economyCreditCost`, `economyWindowHours`); the
 * model is put back on builtin without them afterwards.
 */
export async function economyBatch(
  api: TestApp,
  a: TestAccount,
  route: ProviderRoute,
  prompts: string[],
  opts: { model?: string; economyCreditCost?: number } = {},
): Promise<string> {
  const model = opts.model ?? 'eta-image';
  const res = await api
    .admin('patch', `/v1/admin/models/${model}`)
    .send({ provider: route, economyCreditCost: { '1K': opts.economyCreditCost ?? 1 }, economyWindowHours: 24 });
  if (res.status !== 200) throw new Error(`PATCH /v1/admin/models/${model} answered ${res.status}: ${JSON.stringify(res.body)}`);
  try {
    return await createBatch(api, a, { model, prompts, tier: 'economy' });
  } finally {
    await api
      .admin('patch', `/v1/admin/models/${model}`)
      .send({ provider: { type: 'builtin' }, economyCreditCost: null })
      .expect(200);
  }
}

/** Where the simulated batch API keeps its state under a local storage dataDir. */
export function simulatedStateDir(dataDir: string): string {
  return path.join(dataDir, 'files', 'upstream-batches', 'simulated');
}

/**
 * How many times each task id was submitted to the simulated batch API: counted over every
 * batch it created (each names its input file), as an upstream would bill them.
 */
export function simulatedSubmissions(dataDir: string): Map<string, number> {
  const root = simulatedStateDir(dataDir);
  const counts = new Map<string, number>();
  const batchesDir = path.join(root, 'batches');
  if (!fs.existsSync(batchesDir)) return counts;
  for (const file of fs.readdirSync(batchesDir)) {
    if (!file.endsWith('.json')) continue;
    const manifest = JSON.parse(fs.readFileSync(path.join(batchesDir, file), 'utf8')) as { inputId: string };
    const input = fs.readFileSync(path.join(root, 'inputs', `${manifest.inputId}.jsonl`), 'utf8');
    for (const line of input.split('\n').filter(Boolean)) {
      const key = (JSON.parse(line) as { custom_id: string }).custom_id;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  return counts;
}

/** Upstream batches the simulated API created (manifests). */
export function simulatedBatchesCreated(dataDir: string): number {
  const dir = path.join(simulatedStateDir(dataDir), 'batches');
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.json')).length : 0;
}

/**
 * Money exact for one batch of the account: the balance equals the ledger's sum and what was
 * given minus the charge plus one refund of the unit cost per failed task, each refunded once.
 */
export async function expectMoneyExact(api: TestApp, a: TestAccount, batchId: string, granted: number): Promise<void> {
  const [batch] = await api.db.query(`SELECT unit_cost, credits_charged, credits_refunded, failed_count FROM batches WHERE id = $1`, [
    batchId,
  ]);
  const refunds: { task_id: string; amount: string }[] = await api.db.query(
    `SELECT task_id, amount FROM ledger_entries WHERE batch_id = $1 AND kind = 'task_refund'`,
    [batchId],
  );
  const [{ failed }] = await api.db.query(`SELECT count(*)::int AS failed FROM tasks WHERE batch_id = $1 AND status = 'failed'`, [batchId]);
  if (refunds.length !== failed) throw new Error(`${refunds.length} refunds for ${failed} failed tasks`);
  if (new Set(refunds.map((r) => r.task_id)).size !== refunds.length) throw new Error('a task was refunded twice');
  if (refunds.some((r) => Number(r.amount) !== batch.unit_cost)) throw new Error(`a refund is not the unit cost ${batch.unit_cost}`);
  if (Number(batch.credits_refunded) !== failed * batch.unit_cost)
    throw new Error(`credits_refunded ${batch.credits_refunded} != ${failed} x ${batch.unit_cost}`);
  if (batch.failed_count !== failed) throw new Error(`failed_count ${batch.failed_count} != ${failed}`);
  const balance = await api.balance(a.id);
  const ledger = await api.ledgerSum(a.id);
  if (balance !== ledger) throw new Error(`balance ${balance} != ledger ${ledger}`);
  const expected = granted - Number(batch.credits_charged) + failed * batch.unit_cost;
  if (balance !== expected) throw new Error(`balance ${balance} != ${expected}`);
}
