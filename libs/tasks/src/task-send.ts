import { PreparedStatement } from '@app/database';
import { Fence, FencedWrites, lockBatchesInIdOrder, MAX_GROUP, overdueBatchesIn, statusIs } from './fenced-write';
import { groupWrites } from './group-writes';

/** A progress report to write. */
interface Progress {
  fence: Fence;
  pct: number;
}

/**
 * A group of "sends": each task's fenced move into its provider's hands, right before the
 * call (sent_at, progress 1), with its batch's version bump. A task cancelled (or taken
 * over) meanwhile is not sent, nor one whose batch's deadline has passed (left to the deadline sweep). $1 task ids, $2 attempts, $3 the tasks' batch ids. Here and in
 * the progress group the rows are found by primary key whatever the statistics say (statusIs).
 */
const SEND_GROUP: PreparedStatement = {
  name: 'kiln_send_group',
  text: `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[]) AS i(id, attempt)
), locked AS (
  ${lockBatchesInIdOrder('id = ANY($3::uuid[])')}
), overdue AS (
  ${overdueBatchesIn('locked')}
), sent AS (
  UPDATE tasks t SET sent_at = now(), progress = GREATEST(t.progress, 1), updated_at = now()
    FROM input i
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt AND t.sent_at IS NULL
     AND t.batch_id IN (SELECT id FROM locked) AND t.batch_id NOT IN (SELECT id FROM overdue)
   RETURNING t.id, t.attempts, t.batch_id
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM sent)
)
SELECT id, attempts, batch_id FROM sent`,
};

/**
 * A group of progress writes, fenced, never backwards, with their batches' version bumps
 * (batches locked first, in id order). $1 task ids, $2 attempts, $3 percentages, $4 batch ids.
 */
const PROGRESS_GROUP: PreparedStatement = {
  name: 'kiln_progress_group',
  text: `
WITH locked AS (
  ${lockBatchesInIdOrder('id = ANY($4::uuid[])')}
), moved AS (
  UPDATE tasks t SET progress = i.pct, updated_at = now()
    FROM unnest($1::uuid[], $2::int[], $3::int[]) AS i(id, attempt, pct)
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt AND t.progress < i.pct
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.batch_id
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM moved)
)
SELECT DISTINCT batch_id FROM moved`,
};

/** A claimed task in its provider's hands: the send, then its progress. Both group-committed. */
export class TaskSends {
  private readonly sendOne = groupWrites((group: readonly Fence[]) => this.sendGroup(group), MAX_GROUP);
  private readonly progressOne = groupWrites((group: readonly Progress[]) => this.progressGroup(group), MAX_GROUP);

  constructor(private readonly writes: FencedWrites) {}

  /**
   * Hands the task to its provider: called when the run holds its model or render slot,
   * right before the call. False when the fence no longer holds (the task was cancelled or
   * taken over while the run waited): the run must not send it.
   */
  send(fence: Fence): Promise<boolean> {
    return this.sendOne(fence);
  }

  /** Fire-and-forget friendly: never throws, and never moves progress backwards. */
  async reportProgress(fence: Fence, pct: number): Promise<void> {
    try {
      await this.progressOne({ fence, pct });
    } catch (err) {
      this.writes.logger.debug(`progress write for ${fence.taskId} failed: ${(err as Error).message}`);
    }
  }

  private async sendGroup(group: readonly Fence[]): Promise<boolean[]> {
    const rows = await this.writes.grouped<{ id: string; attempts: number; batch_id: string }>(SEND_GROUP, [
      group.map((f) => f.taskId),
      group.map((f) => f.attempt),
      [...new Set(group.map((f) => f.batchId))],
    ]);
    this.writes.announce(rows.map((row) => row.batch_id));
    const sent = new Set(rows.map((row) => `${row.id}:${row.attempts}`));
    // A fence sent twice in one group (a duplicate delivery) is sent once.
    return group.map((f) => sent.delete(`${f.taskId}:${f.attempt}`));
  }

  private async progressGroup(group: readonly Progress[]): Promise<void[]> {
    const rows = await this.writes.grouped<{ batch_id: string }>(PROGRESS_GROUP, [
      group.map((p) => p.fence.taskId),
      group.map((p) => p.fence.attempt),
      group.map((p) => p.pct),
      [...new Set(group.map((p) => p.fence.batchId))],
    ]);
    this.writes.announce(rows.map((row) => row.batch_id));
    return group.map(() => undefined);
  }
}
