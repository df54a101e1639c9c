import { EntityManager } from 'typeorm';
import { AccountStatus, BATCH_OPEN_SQL, BatchTier, queryRows } from '@app/database';
import { ErrorCode, KilnError, notFound } from '@app/errors';

/** What an account's plan allows a new batch. */
export interface BatchLimits {
  maxImagesPerBatch: number;
  maxConcurrentBatches: number;
  /** Economy batches have their own cap; they do not count toward maxConcurrentBatches. */
  maxConcurrentEconomyBatches: number;
  /** The holder's lowCreditsThreshold (a `credits.low` alert), read with the lock; null: none. */
  lowCreditsThreshold: number | null;
}

/** The creating key's budget columns, read under its row lock (libs/billing key-budget.ts reads them). */
export interface LockedKeyBudget {
  creditCapPerDay: number | null;
  budgetCredits: number | null;
  budgetPeriod: 'day' | 'week' | 'month' | null;
}

/** What the limits are read from: the account's status and its plan's caps. */
const LIMIT_COLUMNS =
  'a.status, a.low_credits_threshold, p.max_images_per_batch, p.max_concurrent_batches, p.max_concurrent_economy_batches';

/** A row of LIMIT_COLUMNS. */
interface LimitsRow {
  status: AccountStatus;
  max_images_per_batch: number;
  max_concurrent_batches: number;
  max_concurrent_economy_batches: number;
  low_credits_threshold: string | null;
}

/**
 * Locks the account row for the rest of the caller's transaction and reads its plan's batch
 * limits: one account's batch creations run one at a time from here to commit, so two of
 * them cannot both take its last concurrent slot. A disabled account is refused.
 *
 * With the creating key (`apiKeyId`), that key's row is locked in the same statement and its
 * budget columns returned (null: no key), so an edit of the budget cannot race the check, and
 * two creations through the key cannot both see the same spend. One statement, not two: every
 * round trip here is time the account's other creations wait.
 */
export async function lockAccountForBatch(
  m: EntityManager,
  accountId: string,
  apiKeyId: string | null,
): Promise<BatchLimits & { keyBudget: LockedKeyBudget | null }> {
  if (apiKeyId) {
    const [row] = await queryRows<
      LimitsRow & { credit_cap_per_day: number | null; budget_credits: number | null; budget_period: LockedKeyBudget['budgetPeriod'] }
    >(
      m,
      `SELECT ${LIMIT_COLUMNS}, k.credit_cap_per_day, k.budget_credits, k.budget_period
         FROM accounts a JOIN plans p ON p.key = a.plan_key JOIN api_keys k ON k.id = $2 AND k.account_id = a.id
        WHERE a.id = $1 FOR UPDATE OF a, k`,
      [accountId, apiKeyId],
    );
    // No row: the account is gone, or the key is not (or no longer) this account's. The
    // account's own lock then says which, and a vanished key has no budget to hold.
    if (row) {
      const keyBudget = { creditCapPerDay: row.credit_cap_per_day, budgetCredits: row.budget_credits, budgetPeriod: row.budget_period };
      return { ...limitsOf(row), keyBudget };
    }
  }
  return { ...(await batchLimitsOf(m, accountId, 'FOR UPDATE OF a')), keyBudget: null };
}

/** The same limits and refusal as lockAccountForBatch, read without a lock (an estimate reserves nothing). */
export async function readBatchLimits(m: Pick<EntityManager, 'query'>, accountId: string): Promise<BatchLimits> {
  return batchLimitsOf(m, accountId, '');
}

async function batchLimitsOf(m: Pick<EntityManager, 'query'>, accountId: string, lock: 'FOR UPDATE OF a' | ''): Promise<BatchLimits> {
  const [row] = await queryRows<LimitsRow>(
    m,
    `SELECT ${LIMIT_COLUMNS} FROM accounts a JOIN plans p ON p.key = a.plan_key WHERE a.id = $1 ${lock}`,
    [accountId],
  );
  return limitsOf(row);
}

/** The limits of a row of LIMIT_COLUMNS, or the refusal: no such account, or a disabled one. */
function limitsOf(row: LimitsRow | undefined): BatchLimits {
  if (!row) throw notFound('Account');
  if (row.status !== 'active') throw new KilnError(ErrorCode.AccountDisabled, 'This account is disabled');
  return {
    maxImagesPerBatch: row.max_images_per_batch,
    maxConcurrentBatches: row.max_concurrent_batches,
    maxConcurrentEconomyBatches: row.max_concurrent_economy_batches,
    lowCreditsThreshold: row.low_credits_threshold === null ? null : Number(row.low_credits_threshold),
  };
}

/**
 * Batches of a tier that count against its cap: those not finished yet. Standard ones count
 * against the plan's maxConcurrentBatches, economy ones (which wait hours for their upstream
 * batch) against maxConcurrentEconomyBatches only. The one definition, for the limits' checks
 * and for what the account is shown; create asks it under lockAccountForBatch's lock.
 */
export async function countActiveBatches(
  m: Pick<EntityManager, 'query'>,
  accountId: string,
  tier: BatchTier = 'standard',
): Promise<number> {
  const [{ active }] = await queryRows<{ active: number }>(
    m,
    `SELECT count(*)::int AS active FROM batches WHERE account_id = $1 AND tier = $2 AND ${BATCH_OPEN_SQL}`,
    [accountId, tier],
  );
  return active;
}
