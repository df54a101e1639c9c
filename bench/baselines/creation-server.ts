/**
 * Baseline of the creation scenario: POST /v1/batches with bare node:http, pg and bull.
 * The key check and the model's price (two reads), then one transaction with Kiln's writes
 * (the conditional charge UPDATE that also locks the account row, the ledger row, the
 * batch row, every task in one multi-row INSERT), then one `addBulk` of a job per task
 * (jobId = task id) on a queue of its own prefix. Environment: DATABASE_URL, REDIS_URL,
 * RAW_BULL_PREFIX. Reports its port over IPC.
 */
import { randomInt, randomUUID } from 'node:crypto';
import * as http from 'node:http';
import Bull from 'bull';
import { authenticate, HttpError, listenAndReport, rawPool, readBody, sendError, sendJson } from './raw-common';

const db = rawPool(process.env.DATABASE_URL ?? '');
const queue = new Bull('bench-create', process.env.REDIS_URL ?? '', {
  prefix: process.env.RAW_BULL_PREFIX ?? 'kiln-bench-raw:bull',
  defaultJobOptions: { removeOnComplete: true },
});

/** The price read's row (jsonb comes back parsed). */
interface ModelPriceRow {
  credit_cost: Record<string, number>;
  provider: unknown;
}

/** The charge's RETURNING row: a bigint, which node-postgres gives as a string. */
interface ChargedRow {
  balance: string;
}

async function create(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const key = await authenticate(db, req, 'batches:write');
  const input = JSON.parse(await readBody(req)) as { prompts?: unknown; model?: unknown };
  const prompts = input.prompts;
  if (!Array.isArray(prompts) || prompts.length < 1 || prompts.length > 100 || !prompts.every((p) => typeof p === 'string' && p.trim())) {
    throw new HttpError(400, 'invalid_request');
  }
  if (typeof input.model !== 'string') throw new HttpError(400, 'invalid_request');
  const models = await db.query<ModelPriceRow>(`SELECT credit_cost, provider FROM models WHERE key = $1 AND enabled`, [input.model]);
  const model = models.rows[0];
  if (!model) throw new HttpError(400, 'unknown_model');
  const unitCost: number = model.credit_cost['1K'];
  const total = prompts.length;
  const cost = total * unitCost;
  const batchId = randomUUID();
  const taskIds = prompts.map(() => randomUUID());

  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const charged = await client.query<ChargedRow>(
      `UPDATE accounts SET balance = balance - $2 WHERE id = $1 AND balance >= $2 AND status = 'active' RETURNING balance`,
      [key.accountId, cost],
    );
    if (charged.rowCount === 0) throw new HttpError(402, 'insufficient_credits');
    await client.query(
      `INSERT INTO ledger_entries (account_id, amount, balance_after, kind, reason, batch_id, api_key_id, charge_day)
       VALUES ($1, $2, $3, 'batch_charge', 'Batch charge', $4, $5, $6)`,
      [key.accountId, -cost, charged.rows[0].balance, batchId, key.keyId, new Date().toISOString().slice(0, 10)],
    );
    await client.query(
      `INSERT INTO batches (id, account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background,
         count_per_combo, ref_mode, ref_images, total, note, unit_cost, credits_charged, credits_refunded, provider,
         width, height, status, created_via_api, created_at)
       VALUES ($1, $2, $3, $4, $5, '1:1', '1K', 'auto', NULL, 1, 'none', '[]', $6, NULL, $7, $8, 0, $9, 1024, 1024,
         'pending', true, clock_timestamp())`,
      [batchId, key.accountId, key.keyId, JSON.stringify(prompts), input.model, total, unitCost, cost, JSON.stringify(model.provider)],
    );
    const values: string[] = [];
    const params: unknown[] = [];
    prompts.forEach((prompt: string, seq) => {
      const p = params.length;
      values.push(`($${p + 1}, $${p + 2}, $${p + 3}, $${p + 4}, $${p + 5}, $${p + 6})`);
      params.push(taskIds[seq], batchId, key.accountId, seq, prompt, randomInt(0, 2 ** 31 - 1));
    });
    await client.query(`INSERT INTO tasks (id, batch_id, account_id, seq, prompt, seed) VALUES ${values.join(', ')}`, params);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
  await queue.addBulk(taskIds.map((taskId) => ({ name: 'render', data: { taskId }, opts: { jobId: taskId } })));
  sendJson(res, 201, { id: batchId, total, creditsCharged: cost, status: 'pending' });
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/v1/batches') {
    return sendJson(res, 404, { error: { code: 'not_found', message: 'not_found' } });
  }
  create(req, res).catch((err) => sendError(res, err));
});
listenAndReport(server, 'creation-baseline');
