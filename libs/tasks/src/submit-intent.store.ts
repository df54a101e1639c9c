import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { queryRows } from '@app/database';
import type { Fence } from './fenced-write';

/** A submit that was about to be sent and whose answer was never recorded: the upstream may have taken it. */
export interface SubmitIntent {
  /** When it was about to be sent (PostgreSQL's clock). */
  at: Date;
  /** `at` exactly as stored (microseconds; a Date keeps milliseconds): what names this intent to UpstreamWaitStore.handOff. */
  stamp: string;
  /** What finds the request again upstream, as the route's type wrote it. */
  key: Record<string, unknown>;
}

/**
 * The intent to submit to a queue upstream, committed before the call (synchronously, as the
 * submit's answer is: a PostgreSQL crash must not undo it), so that a crash between the call
 * and the recording of its answer leaves a trace: a task with an intent and no request id.
 * The next attempt looks it up upstream where the route's type can, else applies the route's
 * `onUnknownSubmit` (libs/generation's usecases/submit-with-intent.ts). Task rows only, no batch
 * lock: nothing a client sees changes.
 */
@Injectable()
export class SubmitIntentStore {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Records the intent of this attempt; answers its stamp (SubmitIntent.stamp), or null when the
   * fence no longer holds (the call must not be made).
   */
  async record(fence: Fence, key: Record<string, unknown>): Promise<string | null> {
    const rows = await queryRows<{ stamp: string }>(
      this.db,
      `WITH marked AS (
         UPDATE tasks SET submit_intent_at = now(), submit_intent = $3::jsonb
          WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NULL
          RETURNING submit_intent_at
       )
       SELECT submit_intent_at::text AS stamp, set_config('synchronous_commit', 'on', true) AS durable FROM marked`,
      [fence.taskId, fence.attempt, JSON.stringify(key)],
    );
    return rows[0]?.stamp ?? null;
  }

  /** The intent an earlier attempt (or this one) left without a recorded request; null when none. */
  async unanswered(fence: Fence): Promise<SubmitIntent | null> {
    const [row] = await queryRows<{ submit_intent_at: Date; stamp: string; submit_intent: Record<string, unknown> | null }>(
      this.db,
      `SELECT submit_intent_at, submit_intent_at::text AS stamp, submit_intent FROM tasks
        WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NULL AND submit_intent_at IS NOT NULL`,
      [fence.taskId, fence.attempt],
    );
    return row ? { at: new Date(row.submit_intent_at), stamp: row.stamp, key: row.submit_intent ?? {} } : null;
  }

  /**
   * The upstream answered that it did not take the request (or its doubt is settled): no
   * intent is left. Synchronous too (an error path, rare): a PostgreSQL crash undoing the
   * clear would make a `fail` route fail a task the upstream never took.
   */
  async clear(fence: Fence): Promise<void> {
    await queryRows(
      this.db,
      `WITH cleared AS (
         UPDATE tasks SET submit_intent_at = NULL, submit_intent = NULL
          WHERE id = $1 AND status = 'running' AND attempts = $2 AND submit_intent_at IS NOT NULL
          RETURNING id
       )
       SELECT id, set_config('synchronous_commit', 'on', true) AS durable FROM cleared`,
      [fence.taskId, fence.attempt],
    );
  }
}
