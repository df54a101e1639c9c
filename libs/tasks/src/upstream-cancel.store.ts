import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { BillingService } from '@app/billing';
import { ProviderRoute, queryRows } from '@app/database';
import { RedisService } from '@app/redis';
import { BatchChangePublisher } from './batch-changes';
import { tallyAssignments } from './batch-tally';
import { FencedWrites } from './fenced-write';
import { TASK_OUTCOME_HOOK, TaskOutcomeHook } from './task-outcome.hook';

/** The channel the api publishes on when it marked upstream cancels: the generators' senders wake at once. */
export function upstreamCancelChannel(redis: Pick<RedisService, 'key'>): string {
  return redis.key('upstream-cancel-asked');
}

/** The api's side: a hint that cancels wait to be sent (a lost one is found by the senders' next look). */
@Injectable()
export class UpstreamCancelSignal {
  private readonly logger = new Logger(UpstreamCancelSignal.name);

  constructor(private readonly redis: RedisService) {}

  signal(): void {
    this.redis.client
      .publish(upstreamCancelChannel(this.redis), '1')
      .catch((err: Error) => this.logger.debug(`Could not signal the upstream cancels: ${err.message}`));
  }
}

/** A cancel a generator took to send: the task's accepted request and its batch's route. */
export interface UpstreamCancelToSend {
  taskId: string;
  batchId: string;
  /** The batch's model (for metrics). */
  model: string;
  requestId: string;
  handle: Record<string, string>;
  provider: ProviderRoute;
}

/**
 * The generator's side of a cancel that reaches the upstream (markUpstreamCancels marks the
 * tasks): each marked task, once running (a task marked between two attempts waits for the
 * next, which resumes its request), is taken by one sender under a lease (`sending`, committed before
 * the call, so a restart finds it), asked of its upstream once, and the answer recorded:
 * `confirmed` cancels the task and refunds its price, exactly once (the task moves from
 * `running` once, in the same transaction as the refund and the batch's tally); otherwise
 * `unconfirmed`, and the task finishes and is charged as any other. Only a sender that died
 * during the call leaves its cancel to be sent again, when its lease has run out.
 */
@Injectable()
export class UpstreamCancelStore {
  private readonly writes: FencedWrites;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly billing: BillingService,
    changes: BatchChangePublisher,
    @Optional() @Inject(TASK_OUTCOME_HOOK) outcomes: TaskOutcomeHook | null = null,
  ) {
    this.writes = new FencedWrites(db, changes, outcomes);
  }

  /**
   * Up to `limit` cancels due (asked and not held back, or a dead sender's), leased for
   * `leaseMs`. Committed synchronously: the lease must outlive a PostgreSQL crash, or a
   * restart would send the cancel again.
   */
  async take(leaseMs: number, limit: number): Promise<UpstreamCancelToSend[]> {
    return this.db.transaction(async (m) => {
      await m.query(`SELECT set_config('synchronous_commit', 'on', true)`);
      const rows = await queryRows<{
        id: string;
        batch_id: string;
        upstream_request_id: string;
        upstream_handle: Record<string, string>;
        provider: ProviderRoute;
        model: string;
      }>(
        m,
        `WITH due AS (
           SELECT id FROM tasks
            WHERE upstream_cancel IN ('asked', 'sending') AND (upstream_cancel_at IS NULL OR upstream_cancel_at <= now())
              AND status = 'running'
            ORDER BY upstream_cancel_at NULLS FIRST LIMIT $2 FOR UPDATE SKIP LOCKED
         ), taken AS (
           UPDATE tasks t SET upstream_cancel = 'sending', upstream_cancel_at = now() + $1::int * interval '1 millisecond'
            WHERE t.id IN (SELECT id FROM due)
            RETURNING t.id, t.batch_id, t.upstream_request_id, t.upstream_handle, t.route_index
         )
         -- The route the request was sent on: the task's place in its batch's chain.
         SELECT taken.*, COALESCE(b.routes -> taken.route_index, b.provider) AS provider, b.model
           FROM taken JOIN batches b ON b.id = taken.batch_id`,
        [leaseMs, limit],
      );
      return rows.map((r) => ({
        taskId: r.id,
        batchId: r.batch_id,
        model: r.model,
        requestId: r.upstream_request_id,
        handle: r.upstream_handle,
        provider: r.provider,
      }));
    });
  }

  /**
   * The upstream confirmed the request did not run: the task becomes `cancelled` and its price
   * is refunded (one cancel_refund row), counted into its batch, which finishes if it was its
   * last task (batch.completed in the outbox). False when the task had ended meanwhile.
   */
  confirmed(c: UpstreamCancelToSend): Promise<boolean> {
    return this.writes.inTransaction(c.batchId, async (m) => {
      const [batch] = await queryRows<{ account_id: string; unit_cost: number }>(
        m,
        `SELECT account_id, unit_cost FROM batches WHERE id = $1 FOR UPDATE`,
        [c.batchId],
      );
      if (!batch) return false;
      const taken = await queryRows<{ id: string }>(
        m,
        `UPDATE tasks SET status = 'cancelled', upstream_cancel = 'confirmed', upstream_cancel_at = NULL,
                upstream_poll_at = NULL, upstream_poller = NULL, upstream_lease_until = NULL,
                progress = 0, finished_at = now(), updated_at = now()
          WHERE id = $1 AND batch_id = $2 AND status = 'running' AND upstream_request_id = $3 AND upstream_cancel = 'sending'
          RETURNING id`,
        [c.taskId, c.batchId, c.requestId],
      );
      if (taken.length === 0) return false;
      await this.billing.refundCancelled(m, { accountId: batch.account_id, batchId: c.batchId, amount: batch.unit_cost, tasks: 1 });
      const [row] = await queryRows<{ finished_at: Date | null }>(
        m,
        `UPDATE batches SET ${tallyAssignments({ succeeded: '0', failed: '0', cancelled: '1', refunded: '$2', preview: 'NULL' })}
          WHERE id = $1
          RETURNING finished_at`,
        [c.batchId, batch.unit_cost],
      );
      if (row.finished_at !== null) await this.writes.recordOutcomes(m, [c.batchId], { ended: [], finishedBatchIds: [c.batchId] });
      return true;
    });
  }

  /**
   * Whether this attempt's cancel is asked and not yet answered: a poll that finds the request
   * ended meanwhile (the cancel taken upstream) leaves the task to the sender's answer.
   */
  async pending(fence: { taskId: string; attempt: number }): Promise<boolean> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `SELECT id FROM tasks WHERE id = $1 AND attempts = $2 AND status = 'running' AND upstream_cancel IN ('asked', 'sending')`,
      [fence.taskId, fence.attempt],
    );
    return rows.length > 0;
  }

  /** The upstream runs (or ran) the request, or did not say: the task finishes and is charged as any other. */
  unconfirmed(c: UpstreamCancelToSend): Promise<boolean> {
    return this.settle(c, `upstream_cancel = 'unconfirmed', upstream_cancel_at = NULL`);
  }

  /** The upstream asked to be asked later (429): back to `asked`, not sent before `at`. */
  later(c: UpstreamCancelToSend, at: Date): Promise<boolean> {
    return this.settle(c, `upstream_cancel = 'asked', upstream_cancel_at = $4`, [at]);
  }

  /** A sender's answer on a task it still holds; the batch's version moves (its `cancelling` count changes). */
  private settle(c: UpstreamCancelToSend, assignments: string, extra: unknown[] = []): Promise<boolean> {
    return this.writes.inTransaction(c.batchId, async (m) => {
      await m.query(`SELECT id FROM batches WHERE id = $1 FOR UPDATE`, [c.batchId]);
      const rows = await queryRows<{ id: string }>(
        m,
        `UPDATE tasks SET ${assignments}, updated_at = now()
          WHERE id = $1 AND batch_id = $2 AND upstream_request_id = $3 AND upstream_cancel = 'sending'
          RETURNING id`,
        [c.taskId, c.batchId, c.requestId, ...extra],
      );
      if (rows.length === 0) return false;
      await m.query(`UPDATE batches SET version = version + 1 WHERE id = $1`, [c.batchId]);
      return true;
    });
  }
}
