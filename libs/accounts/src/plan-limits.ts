import { EntityManager } from 'typeorm';
import { BATCH_OPEN_SQL, BatchTier } from '@app/database';
import { ErrorCode, KilnError, notFound } from '@app/errors';

/** What an account's plan allows a new batch. */
export interface BatchLimits {
  maxImagesPerBatch: number;
  maxConcurrentBatches: number;
  /** Economy batches have their own cap; they do not count toward maxConcurrentBatches. */
  maxConcurrentEconomyBatches: number;
}

/**
 * Locks the account row for the rest of the caller's transaction and reads its plan's batch
 * limits: one account's batch creations run one at a time from here to commit, so two of
 * them cannot both take its last concurrent slot. A disabled account is refused.
 */
export async function lockAccountForBatch(m: EntityManager, accountId: string): Promise<BatchLimits> {
  return batchLimitsOf(m, accountId, 'FOR UPDATE OF a');
}

/** The same limits and refusal as lockAccountForBatch, read without a lock (an estimate reserves nothing). */
export async function readBatchLimits(m: Pick<EntityManager, 'query'>, accountId: string): Promise<BatchLimits> {
  return batchLimitsOf(m, accountId, '');
}

async function batchLimitsOf(m: Pick<EntityManager, 'query'>, accountId: string, lock: 'FOR UPDATE OF a' | ''): Promise<BatchLimits> {
  const [row] = await m.query(
    `SELECT a.status, p.max_images_per_batch, p.max_concurrent_batches, p.max_concurrent_economy_batches
       FROM accounts a JOIN plans p ON p.key = a.plan_key
      WHERE a.id = $1 ${lock}`,
    [accountId],
  );
  if (!row) throw notFound('Account');
  if (row.status !== 'active') throw new KilnError(ErrorCode.AccountDisabled, 'This account is disabled');
  return {
    maxImagesPerBatch: row.max_images_per_batch,
    maxConcurrentBatches: row.max_concurrent_batches,
    maxConcurrentEconomyBatches: row.max_concurrent_economy_batches,
  };
}

/**
 * Batches of a tier that count against its cap: those not finished yet. Standard ones count
 * against the plan's maxConcurrentBatches, economy ones (which wait hours for their upstream
 * batch) against maxConcurrentEconomyBatches only. The one definition, for the limits' checks
 * and for what the account is shown; create asks it under lockAccountForBatch's lock.
 */
export async function countActiveBatches(m: Pick<EntityManager, 'query'>, accountId: string, tier: BatchTier = 'standard'): Promise<number> {
  const [{ active }] = await m.query(
    `SELECT count(*)::int AS active FROM batches WHERE account_id = $1 AND tier = $2 AND ${BATCH_OPEN_SQL}`,
    [accountId, tier],
  );
  return active;
}
