import { Pool } from 'pg';
import { LocalStorageDriver } from '@app/storage';

export interface InvariantResult {
  name: string;
  /** What must hold. */
  rule: string;
  violations: number;
  /** A few offending rows, for the log. */
  examples: unknown[];
}

interface SqlInvariant {
  name: string;
  rule: string;
  /** Returns one row per violation. */
  sql: string;
  params?: (ctx: InvariantContext) => unknown[];
}

export interface InvariantContext {
  /** Batch ids the api answered 201 for. */
  acknowledged: string[];
  /** Kiln's DATA_DIR (local storage): result objects live under files/. */
  dataDir: string;
  /** The batch ids each Idempotency-Key was answered with (201, first or replayed). */
  idempotency: Map<string, Set<string>>;
}

/**
 * The money and consistency invariants, checked once every batch has settled. Ledger kinds
 * and columns are libs/billing's; task and batch columns are libs/database's entities.
 */
const SQL_INVARIANTS: SqlInvariant[] = [
  {
    name: 'balance = ledger',
    rule: "every account's balance equals the sum of its ledger rows",
    sql: `SELECT a.id, a.balance, COALESCE(l.sum, 0) AS ledger_sum
            FROM accounts a
            LEFT JOIN (SELECT account_id, SUM(amount) AS sum FROM ledger_entries GROUP BY account_id) l ON l.account_id = a.id
           WHERE a.balance <> COALESCE(l.sum, 0)`,
  },
  {
    name: 'never negative',
    rule: 'no debit but a purchase refund leaves a balance below zero; only an account with a purchase refund is below zero',
    // A card refund takes back credits already spent (docs/billing.md): the debt is the one
    // way below zero. Charges and adjustments are conditional on the balance.
    sql: `SELECT id::text, balance FROM accounts a WHERE balance < 0
             AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.account_id = a.id AND l.kind = 'purchase_refund')
          UNION ALL
          SELECT account_id::text, balance_after FROM ledger_entries WHERE balance_after < 0 AND amount < 0 AND kind <> 'purchase_refund'`,
  },
  {
    name: 'ledger history',
    rule: "each ledger row's balance_after is the running sum of the account's rows up to it",
    // The row is inserted while the account's row is locked by the balance UPDATE, so within
    // one account ids follow the order in which the balance changed.
    sql: `SELECT id, account_id, balance_after, running FROM (
            SELECT id, account_id, balance_after, SUM(amount) OVER (PARTITION BY account_id ORDER BY id) AS running
              FROM ledger_entries) l
           WHERE balance_after <> running`,
  },
  {
    name: 'one charge per batch',
    rule: 'exactly one batch_charge row per batch, of -(total x unit_cost), equal to credits_charged',
    sql: `SELECT b.id, b.total, b.unit_cost, b.credits_charged, count(l.id) AS charges, SUM(l.amount) AS charged
            FROM batches b
            LEFT JOIN ledger_entries l ON l.batch_id = b.id AND l.kind = 'batch_charge'
           GROUP BY b.id
          HAVING count(l.id) <> 1 OR SUM(l.amount) <> -(b.total::bigint * b.unit_cost)
              OR b.credits_charged <> b.total * b.unit_cost`,
  },
  {
    name: 'charge without batch',
    rule: 'every batch_charge, task_refund and cancel_refund row belongs to an existing batch (a task_refund to its task)',
    sql: `SELECT l.id, l.kind, l.batch_id, l.task_id FROM ledger_entries l
           WHERE l.kind IN ('batch_charge', 'task_refund', 'cancel_refund')
             AND (NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = l.batch_id)
                  OR (l.kind = 'task_refund' AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = l.task_id AND t.batch_id = l.batch_id)))`,
  },
  {
    name: 'refunds = failures + cancels',
    rule:
      'per batch: task_refund rows = failed tasks = failed_count; cancel_refund sum = cancelled tasks x unit_cost = cancelled_count x unit_cost; ' +
      'credits_refunded = both sums = (failed + cancelled) x unit_cost',
    sql: `SELECT b.id, b.failed_count, b.cancelled_count, f.failed, f.cancelled, r.refunds, r.refunded, c.cancel_refunded, b.credits_refunded, b.unit_cost
            FROM batches b
            LEFT JOIN (SELECT batch_id, count(*) FILTER (WHERE status = 'failed') AS failed,
                              count(*) FILTER (WHERE status = 'cancelled') AS cancelled
                         FROM tasks GROUP BY batch_id) f ON f.batch_id = b.id
            LEFT JOIN (SELECT batch_id, count(*) AS refunds, SUM(amount) AS refunded FROM ledger_entries
                        WHERE kind = 'task_refund' GROUP BY batch_id) r ON r.batch_id = b.id
            LEFT JOIN (SELECT batch_id, SUM(amount) AS cancel_refunded FROM ledger_entries
                        WHERE kind = 'cancel_refund' GROUP BY batch_id) c ON c.batch_id = b.id
           WHERE COALESCE(r.refunds, 0) <> COALESCE(f.failed, 0)
              OR b.failed_count <> COALESCE(f.failed, 0)
              OR b.cancelled_count <> COALESCE(f.cancelled, 0)
              OR COALESCE(c.cancel_refunded, 0) <> COALESCE(f.cancelled, 0) * b.unit_cost
              OR COALESCE(r.refunded, 0) + COALESCE(c.cancel_refunded, 0) <> b.credits_refunded
              OR b.credits_refunded <> (COALESCE(f.failed, 0) + COALESCE(f.cancelled, 0)) * b.unit_cost`,
  },
  {
    name: 'refund once',
    rule: 'each refund is for a failed task, and no task is refunded twice',
    sql: `SELECT l.task_id, count(*) AS refunds, min(t.status) AS status FROM ledger_entries l
            LEFT JOIN tasks t ON t.id = l.task_id
           WHERE l.kind = 'task_refund'
           GROUP BY l.task_id
          HAVING count(*) <> 1 OR min(t.status) IS DISTINCT FROM 'failed'`,
  },
  {
    name: 'single success',
    rule: 'a succeeded task has one result object, referenced by no other task',
    sql: `SELECT id, result_key, result_url FROM tasks
           WHERE status = 'succeeded' AND (result_key IS NULL OR result_url IS NULL)
          UNION ALL
          SELECT NULL, result_key, NULL FROM tasks WHERE result_key IS NOT NULL GROUP BY result_key HAVING count(*) > 1
          UNION ALL
          SELECT NULL, NULL, result_url FROM tasks WHERE result_url IS NOT NULL GROUP BY result_url HAVING count(*) > 1`,
  },
  {
    name: 'batches settled',
    rule: 'every batch finished: finished_at set, a terminal status (cancelled exactly when a cancel took a task), tasks = total, counts = its tasks',
    sql: `SELECT b.id, b.status, b.finished_at, b.total, b.succeeded_count, b.failed_count, b.cancelled_count, t.n, t.succeeded, t.failed, t.cancelled
            FROM batches b
            LEFT JOIN (SELECT batch_id, count(*) AS n,
                              count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
                              count(*) FILTER (WHERE status = 'failed') AS failed,
                              count(*) FILTER (WHERE status = 'cancelled') AS cancelled
                         FROM tasks GROUP BY batch_id) t ON t.batch_id = b.id
           WHERE b.finished_at IS NULL
              OR b.status NOT IN ('succeeded', 'partial', 'failed', 'cancelled')
              OR COALESCE(t.n, 0) <> b.total
              OR b.succeeded_count + b.failed_count + b.cancelled_count <> b.total
              OR b.succeeded_count <> COALESCE(t.succeeded, 0)
              OR b.failed_count <> COALESCE(t.failed, 0)
              OR b.cancelled_count <> COALESCE(t.cancelled, 0)
              OR (b.status = 'cancelled') <> (b.cancelled_count > 0)
              OR (b.cancelled_count > 0 AND b.cancelled_at IS NULL)
              OR (b.status = 'succeeded' AND b.failed_count > 0)
              OR (b.status = 'failed' AND b.succeeded_count > 0)`,
  },
  {
    name: 'nothing stuck',
    rule: 'no task is left pending, queued or running',
    sql: `SELECT id, status, attempts, updated_at FROM tasks WHERE status IN ('pending', 'queued', 'running')`,
  },
  {
    name: 'acknowledged kept',
    rule: 'every batch the api answered 201 for is in PostgreSQL',
    sql: `SELECT a.id FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = a.id)`,
    params: (ctx) => [ctx.acknowledged],
  },
];

const EXAMPLES = 5;

export async function checkInvariants(db: Pool, ctx: InvariantContext): Promise<InvariantResult[]> {
  const results: InvariantResult[] = [];
  for (const inv of SQL_INVARIANTS) {
    const { rows } = await db.query(inv.sql, inv.params?.(ctx) ?? []);
    results.push({ name: inv.name, rule: inv.rule, violations: rows.length, examples: rows.slice(0, EXAMPLES) });
  }
  results.push(await resultObjectsStored(db, ctx.dataDir));
  const split = [...ctx.idempotency].filter(([, ids]) => ids.size !== 1).map(([key, ids]) => ({ key, ids: [...ids] }));
  results.push({
    name: 'one batch per key',
    rule: 'every Idempotency-Key, however often retried across the faults, was answered with one batch id',
    violations: split.length,
    examples: split.slice(0, EXAMPLES),
  });
  return results;
}

/** Every succeeded task's image is in storage (a success recorded without its object loses it). */
async function resultObjectsStored(db: Pool, dataDir: string): Promise<InvariantResult> {
  const { rows } = await db.query<{ id: string; result_key: string }>(
    `SELECT id, result_key FROM tasks WHERE status = 'succeeded' AND result_key IS NOT NULL`,
  );
  const stored = await storedResultKeys(dataDir);
  const missing = rows.filter((r) => !stored.has(r.result_key));
  return {
    name: 'results stored',
    rule: "every succeeded task's result object exists in storage",
    violations: missing.length,
    examples: missing.slice(0, EXAMPLES),
  };
}

/**
 * Result objects in storage that no task references: what a crash between storing an image
 * and recording it leaves behind. A cost, not a money error: reported, not a violation.
 */
export async function unreferencedResultObjects(db: Pool, dataDir: string): Promise<number> {
  const { rows } = await db.query<{ result_key: string }>(`SELECT result_key FROM tasks WHERE result_key IS NOT NULL`);
  const referenced = new Set(rows.map((r) => r.result_key));
  return [...(await storedResultKeys(dataDir))].filter((key) => !referenced.has(key)).length;
}

/** The result keys the bench's Kiln has stored, listed through the local driver (its layout, either one). */
async function storedResultKeys(dataDir: string): Promise<Set<string>> {
  const keys = new Set<string>();
  for await (const { key } of new LocalStorageDriver({ dataDir, publicBaseUrl: 'http://localhost' }).list('results')) keys.add(key);
  return keys;
}
