import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { LedgerKind, queryRows } from '@app/database';
import { ErrorCode, KilnError } from '@app/errors';
import { budgetOf, KeyBudgetColumns, spentInPeriodByKey } from './key-budget';
import { CHARGE_KIND, REFUND_KINDS_SQL, USAGE_KINDS_SQL } from './ledger-kinds';

export interface ChargeBatch {
  accountId: string;
  batchId: string;
  apiKeyId: string | null;
  amount: number;
}

/** Credits bought (or taken back after a refund) and what the ledger row says. */
export interface PurchaseCredit {
  accountId: string;
  credits: number;
  reason: string;
}

/** The refund of a cancel: every task it cancelled, in one sum. */
export interface RefundCancelled {
  accountId: string;
  batchId: string;
  amount: number;
  tasks: number;
}

export interface RefundTask {
  accountId: string;
  batchId: string;
  taskId: string;
  amount: number;
}

export { CHARGE_KIND, REFUND_KINDS, REFUND_KINDS_SQL, USAGE_KINDS_SQL } from './ledger-kinds';

/** Today's UTC day as stored in ledger_entries.charge_day. */
export function utcDay(at: Date = new Date()): string {
  return at.toISOString().slice(0, 10);
}

/** Unix ms of the next 00:00 UTC, when daily key caps reset. */
export function nextUtcMidnight(at: Date = new Date()): number {
  return Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1);
}

/** The refusal of a batch that costs more than the balance (also what an estimate reports). */
export function insufficientCredits(required: number, balance: number): KilnError {
  return new KilnError(ErrorCode.InsufficientCredits, 'Your balance is lower than the cost of this batch', { required, balance });
}

/** The reason a task refund's ledger row gives. */
const TASK_REFUND_REASON = 'Refund for a failed task';

/**
 * refundTasks' statement: $1 accounts, $2 batches, $3 tasks, $4 amounts, one per task. Each
 * account is credited once with its tasks' sum; its ledger rows then count up to the new
 * balance in the order given (balance_after is the running balance, as with one refund per
 * statement). Tasks already refunded are left out.
 */
const REFUND_TASKS_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::bigint[]) WITH ORDINALITY AS i(account_id, batch_id, task_id, amount, n)
), due AS (
  SELECT i.* FROM input i
   WHERE NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.task_id = i.task_id AND l.kind = 'task_refund')
), sums AS (
  SELECT account_id, sum(amount) AS total FROM due GROUP BY account_id
), credited AS (
  UPDATE accounts a SET balance = a.balance + s.total FROM sums s WHERE a.id = s.account_id
  RETURNING a.id, a.balance, s.total
), charges AS (
  SELECT batch_id, api_key_id, charge_day FROM ledger_entries
   WHERE kind = 'batch_charge' AND batch_id IN (SELECT batch_id FROM due)
), entries AS (
  SELECT d.*, c.balance - c.total + sum(d.amount) OVER (PARTITION BY d.account_id ORDER BY d.n) AS balance_after
    FROM due d JOIN credited c ON c.id = d.account_id
)
INSERT INTO ledger_entries (account_id, amount, balance_after, kind, reason, batch_id, task_id, api_key_id, charge_day)
SELECT e.account_id, e.amount, e.balance_after, 'task_refund', '${TASK_REFUND_REASON}', e.batch_id, e.task_id, ch.api_key_id, ch.charge_day
  FROM entries e LEFT JOIN charges ch ON ch.batch_id = e.batch_id
 ORDER BY e.account_id, e.n
RETURNING task_id`;

/**
 * The only code that changes a balance. Every change is one UPDATE and one ledger row in the
 * same transaction, so the balance always equals the ledger's sum. Charges and downward
 * adjustments are conditional UPDATEs (the WHERE clause forbids overdraft under any
 * concurrency); only a purchase refund may take a balance below zero (takeBackPurchase).
 */
@Injectable()
export class BillingService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * An operator grant (positive) or adjustment (either sign); a negative one never takes the
   * balance below zero. A positive one is always taken, also on a balance a purchase refund
   * left below zero (it pays that debt down).
   */
  async adjust(accountId: string, amount: number, kind: 'grant' | 'adjustment', reason: string): Promise<number> {
    return this.db.transaction((m) => this.adjustIn(m, accountId, amount, kind, reason));
  }

  /** adjust() inside the caller's transaction (an account's creation with its sign-up credits). */
  async adjustIn(m: EntityManager, accountId: string, amount: number, kind: 'grant' | 'adjustment', reason: string): Promise<number> {
    const rows = await queryRows<{ balance: string }>(
      m,
      `UPDATE accounts SET balance = balance + $2::bigint WHERE id = $1 AND ($2::bigint > 0 OR balance + $2::bigint >= 0) RETURNING balance`,
      [accountId, amount],
    );
    if (rows.length === 0) {
      const [acc] = await queryRows<{ balance: string }>(m, `SELECT balance FROM accounts WHERE id = $1`, [accountId]);
      if (!acc) throw new KilnError(ErrorCode.NotFound, 'Account not found');
      throw new KilnError(ErrorCode.InvalidRequest, 'The adjustment would take the balance below zero', {
        field: 'amount',
        reason: 'balance_below_zero',
        balance: Number(acc.balance),
      });
    }
    const balance = Number(rows[0].balance);
    await this.insertLedger(m, { accountId, amount, balanceAfter: balance, kind, reason });
    return balance;
  }

  /**
   * Charges a batch inside the caller's transaction (the one that writes the batch and its
   * tasks). Throws insufficient_credits and changes nothing when the balance is too low.
   * The debit and its ledger row are one statement: the creation's transaction holds the
   * account's lock, and every round trip inside it is time another creation of that account
   * waits.
   */
  async chargeBatch(m: EntityManager, charge: ChargeBatch): Promise<number> {
    const rows = await queryRows<{ balance: string }>(
      m,
      `WITH charged AS (
         UPDATE accounts SET balance = balance - $2::bigint WHERE id = $1 AND balance >= $2::bigint RETURNING balance
       ), entry AS (
         INSERT INTO ledger_entries (account_id, amount, balance_after, kind, reason, batch_id, api_key_id, charge_day)
         SELECT $1, -$2::bigint, balance, $3, 'Batch charge', $4, $5, $6 FROM charged
       )
       SELECT balance FROM charged`,
      [charge.accountId, charge.amount, CHARGE_KIND, charge.batchId, charge.apiKeyId, utcDay()],
    );
    if (rows.length === 0) {
      const [acc] = await queryRows<{ balance: string }>(m, `SELECT balance FROM accounts WHERE id = $1`, [charge.accountId]);
      throw insufficientCredits(charge.amount, Number(acc?.balance ?? 0));
    }
    return Number(rows[0].balance);
  }

  /**
   * Refunds one failed task inside the caller's transaction (the one that marks it failed).
   * The refund carries the key and UTC day of its batch's charge row, so it lowers the usage
   * of the key and day that the charge counted against. The partial unique index on
   * ledger_entries(task_id) makes a second refund of the same task fail, which rolls the
   * caller's whole transaction back: refunded exactly once.
   */
  async refundTask(m: EntityManager, refund: RefundTask): Promise<number> {
    return this.refund(m, refund.accountId, refund.batchId, refund.amount, {
      kind: 'task_refund',
      reason: TASK_REFUND_REASON,
      taskId: refund.taskId,
    });
  }

  /**
   * refundTask for many failed tasks at once, inside the caller's transaction (the one that
   * marks them failed, under their batches' locks): the same rows (one `task_refund` per task,
   * carrying its batch's charge key and day, balance_after the running balance) in two
   * statements whatever their number, so failing the thousands of tasks an upstream batch
   * never ran does not cost thousands of round trips. A task that already has its refund is
   * skipped, as the single path's caller skips one the unique index refuses (the index stays
   * the backstop: a refund racing this one fails the caller's transaction, so nothing is paid
   * twice). Answers the ids of the tasks refunded now.
   */
  async refundTasks(m: EntityManager, refunds: readonly RefundTask[]): Promise<Set<string>> {
    if (refunds.length === 0) return new Set();
    // The accounts locked in id order first: two groups refunding the same accounts cannot deadlock.
    const accounts = [...new Set(refunds.map((r) => r.accountId))].sort();
    await m.query(`SELECT id FROM accounts WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, [accounts]);
    const rows = await queryRows<{ task_id: string }>(m, REFUND_TASKS_SQL, [
      refunds.map((r) => r.accountId),
      refunds.map((r) => r.batchId),
      refunds.map((r) => r.taskId),
      refunds.map((r) => r.amount),
    ]);
    return new Set(rows.map((r) => r.task_id));
  }

  /**
   * Refunds the tasks a cancel took, inside the caller's transaction (the one that marks them
   * cancelled, under their batch's lock): one `cancel_refund` row for the sum. Exactly once
   * because each task moves to `cancelled` only once (the caller's fenced update) and only a
   * task so moved is counted in the sum. Like a task refund, it lowers the usage of the key
   * and day its batch's charge counted against.
   */
  async refundCancelled(m: EntityManager, refund: RefundCancelled): Promise<number> {
    return this.refund(m, refund.accountId, refund.batchId, refund.amount, {
      kind: 'cancel_refund',
      reason: `Refund for ${refund.tasks} cancelled task${refund.tasks === 1 ? '' : 's'}`,
    });
  }

  /**
   * Credits a paid purchase, inside the caller's transaction: the one that records the
   * purchase under its unique session id, so a purchase is credited exactly once.
   */
  async creditPurchase(m: EntityManager, credit: PurchaseCredit): Promise<number> {
    return this.move(m, credit.accountId, credit.credits, 'purchase', credit.reason);
  }

  /**
   * Takes back the credits of a refunded share of a purchase, inside the caller's transaction
   * (the one that records the purchase's new refunded amount). Taken even when the credits
   * were spent: the balance may then go below zero, and chargeBatch refuses every batch until
   * a purchase or a grant brings it back up.
   */
  async takeBackPurchase(m: EntityManager, takeBack: PurchaseCredit): Promise<number> {
    return this.move(m, takeBack.accountId, -takeBack.credits, 'purchase_refund', takeBack.reason);
  }

  /** Credits refunded so far for a batch: its failed tasks and its cancels. */
  async refundedForBatch(m: EntityManager, batchId: string): Promise<number> {
    const [row] = await queryRows<{ refunded: number }>(
      m,
      `SELECT COALESCE(SUM(amount), 0)::int AS refunded FROM ledger_entries
        WHERE batch_id = $1 AND kind IN ${REFUND_KINDS_SQL}`,
      [batchId],
    );
    return row.refunded;
  }

  /** Credits charged through a key today (UTC) minus refunds (failures, cancels) of those same charges. */
  async creditsUsedToday(keyId: string, m: EntityManager = this.db.manager): Promise<number> {
    return (await this.creditsUsedTodayByKey([keyId], m)).get(keyId) ?? 0;
  }

  /** creditsUsedToday of several keys in one query (a key list); a key without usage gets 0. */
  async creditsUsedTodayByKey(keyIds: readonly string[], m: EntityManager = this.db.manager): Promise<Map<string, number>> {
    const used = new Map<string, number>(keyIds.map((id) => [id, 0]));
    if (keyIds.length === 0) return used;
    const rows = await queryRows<{ key_id: string; used: string }>(
      m,
      `SELECT api_key_id AS key_id, COALESCE(-SUM(amount), 0) AS used FROM ledger_entries
        WHERE api_key_id = ANY($1::uuid[]) AND charge_day = $2 AND kind IN ${USAGE_KINDS_SQL}
        GROUP BY api_key_id`,
      [keyIds, utcDay()],
    );
    for (const r of rows) used.set(r.key_id, Number(r.used));
    return used;
  }

  /** What each key with a budget spent in its budget's current period (keys without one: 0). */
  async budgetSpentByKey(
    keys: readonly ({ id: string } & KeyBudgetColumns)[],
    m: EntityManager = this.db.manager,
  ): Promise<Map<string, number>> {
    const withBudget = keys.flatMap((k) => {
      const budget = budgetOf(k);
      return budget ? [{ id: k.id, period: budget.period }] : [];
    });
    return spentInPeriodByKey(m, withBudget);
  }

  /** Balance and the ledger's sum, for invariant checks and the operator. */
  async reconcileBalance(accountId: string): Promise<{ balance: number; ledgerSum: number }> {
    const [row] = await queryRows<{ balance: string; sum: string }>(
      this.db,
      `SELECT a.balance, COALESCE((SELECT SUM(amount) FROM ledger_entries l WHERE l.account_id = a.id), 0) AS sum
         FROM accounts a WHERE a.id = $1`,
      [accountId],
    );
    return { balance: Number(row.balance), ledgerSum: Number(row.sum) };
  }

  /** An unconditional change of balance and its ledger row, in one statement. */
  private async move(m: EntityManager, accountId: string, amount: number, kind: LedgerKind, reason: string): Promise<number> {
    const rows = await queryRows<{ balance: string }>(
      m,
      `WITH moved AS (
         UPDATE accounts SET balance = balance + $2::bigint WHERE id = $1 RETURNING balance
       ), entry AS (
         INSERT INTO ledger_entries (account_id, amount, balance_after, kind, reason)
         SELECT $1, $2::bigint, balance, $3, $4 FROM moved
       )
       SELECT balance FROM moved`,
      [accountId, amount, kind, reason],
    );
    if (rows.length === 0) throw new KilnError(ErrorCode.NotFound, 'Account not found');
    return Number(rows[0].balance);
  }

  /** A refund row carrying the key and UTC day of its batch's charge row. */
  private async refund(
    m: EntityManager,
    accountId: string,
    batchId: string,
    amount: number,
    what: { kind: 'task_refund' | 'cancel_refund'; reason: string; taskId?: string },
  ): Promise<number> {
    const [charge] = await queryRows<{ api_key_id: string | null; charge_day: string }>(
      m,
      `SELECT api_key_id, charge_day::text AS charge_day FROM ledger_entries
        WHERE batch_id = $1 AND kind = 'batch_charge' LIMIT 1`,
      [batchId],
    );
    const rows = await queryRows<{ balance: string }>(m, `UPDATE accounts SET balance = balance + $2 WHERE id = $1 RETURNING balance`, [
      accountId,
      amount,
    ]);
    const balance = Number(rows[0].balance);
    await this.insertLedger(m, {
      accountId,
      amount,
      balanceAfter: balance,
      kind: what.kind,
      reason: what.reason,
      batchId,
      taskId: what.taskId,
      // No charge row (a repaired database): the refund counts against no key's day.
      apiKeyId: charge?.api_key_id ?? null,
      chargeDay: charge?.charge_day ?? undefined,
    });
    return balance;
  }

  private async insertLedger(
    m: EntityManager,
    e: {
      accountId: string;
      amount: number;
      balanceAfter: number;
      kind: LedgerKind;
      reason: string;
      batchId?: string;
      taskId?: string;
      apiKeyId?: string | null;
      chargeDay?: string;
    },
  ): Promise<void> {
    await m.query(
      `INSERT INTO ledger_entries (account_id, amount, balance_after, kind, reason, batch_id, task_id, api_key_id, charge_day)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        e.accountId,
        e.amount,
        e.balanceAfter,
        e.kind,
        e.reason,
        e.batchId ?? null,
        e.taskId ?? null,
        e.apiKeyId ?? null,
        e.chargeDay ?? null,
      ],
    );
  }
}
