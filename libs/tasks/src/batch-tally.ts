import { batchIsDoneSql, batchStatusFromCountsSql } from './batch-status';

/** What a tally adds to a batch: each field is SQL (a number, a parameter, a column). */
export interface TallyDelta {
  succeeded: string;
  failed: string;
  cancelled: string;
  refunded: string;
  /** A preview URL, or NULL. */
  preview: string;
}

/**
 * The SET list that counts terminal tasks into a batch and, when they were its last, settles
 * its status and finished_at; it bumps the batch's version too. Runs in the same statement
 * or transaction as the tasks' fenced updates, so each task is counted exactly once.
 */
export const tallyAssignments = (d: TallyDelta): string => {
  const succeededNow = `succeeded_count + ${d.succeeded}`;
  const failedNow = `failed_count + ${d.failed}`;
  const cancelledNow = `cancelled_count + ${d.cancelled}`;
  const settled = `((${succeededNow}) + (${failedNow}) + (${cancelledNow}))`;
  // The statement cannot tell waiting tasks from running ones, and need not: it runs after a
  // task ended, so with every unfinished task counted as waiting the rule still says
  // `running` until the last one ends.
  const counts = {
    pending: `GREATEST(total - ${settled}, 0)`,
    running: '0',
    succeeded: succeededNow,
    failed: failedNow,
    cancelled: cancelledNow,
  };
  const status = batchStatusFromCountsSql({ stored: 'status', ...counts });
  return `
  succeeded_count = ${succeededNow},
  failed_count = ${failedNow},
  cancelled_count = ${cancelledNow},
  credits_refunded = credits_refunded + ${d.refunded},
  preview_url = COALESCE(preview_url, ${d.preview}),
  status = ${status},
  version = version + 1,
  finished_at = CASE
    WHEN finished_at IS NULL AND ${batchIsDoneSql(counts)} THEN now()
    ELSE finished_at END`;
};
