import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager, In } from 'typeorm';
import { BatchEntity, PreparedStatement, queryPrepared } from '@app/database';
import { batchObject, storedBatchView, TaskOutcomeHook, TaskOutcomes, taskObject, taskPosition } from '@app/tasks';
import { newEvent, OutboxEvent, WebhookEventType } from './webhook-events';

/**
 * One delivery row per event and subscribed, enabled endpoint of the event's account, in one
 * statement for any number of events. The join decides who gets what at the moment of the
 * write; an endpoint deleted meanwhile simply gets nothing.
 */
const INSERT_DELIVERIES: PreparedStatement = {
  name: 'kiln_webhook_insert_deliveries',
  text: `
INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, type, body, next_attempt_at)
SELECT ev.id, e.id, e.account_id, ev.type, ev.body, now()
  FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[]) AS ev(id, account_id, type, body)
  JOIN webhook_endpoints e ON e.account_id = ev.account_id AND e.disabled_at IS NULL AND ev.type = ANY(e.events)`,
};

/** WebhookOutbox.insert, for callers outside Nest's container (a lib's transaction that has no outbox injected). */
export async function writeOutboxEvents(m: DataSource | EntityManager, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await queryPrepared(m, INSERT_DELIVERIES, [
    events.map((e) => e.id),
    events.map((e) => e.accountId),
    events.map((e) => e.type),
    events.map((e) => e.body),
  ]);
}

/** Run before every group of task successes (TaskOutcomeHook.listening). */
const LISTENING: PreparedStatement = {
  name: 'kiln_webhook_listening',
  text: `SELECT EXISTS (
           SELECT 1 FROM batches b JOIN webhook_endpoints e ON e.account_id = b.account_id AND e.disabled_at IS NULL
            WHERE b.id = ANY($1::uuid[])) AS listening`,
};

/** What places a task in its batch (taskPosition): fixed when the batch is created. */
const BATCH_SHAPES: PreparedStatement = {
  name: 'kiln_webhook_batch_shapes',
  text: `SELECT id, ref_mode, ref_images, count_per_combo FROM batches WHERE id = ANY($1::uuid[])`,
};

type BatchShape = Parameters<typeof taskPosition>[1];

/** Batch shapes kept in memory; a generator works on far fewer batches at once. */
const MAX_SHAPES = 10_000;

/**
 * The outbox: events are written in the transaction of the change they report, so a change
 * that commits has its deliveries and one that rolls back has none. The generator's sender
 * (WebhookSender) takes them from there. Registered as the tasks lib's TaskOutcomeHook.
 */
@Injectable()
export class WebhookOutbox implements TaskOutcomeHook {
  private readonly shapes = new Map<string, BatchShape>();

  async listening(m: DataSource | EntityManager, batchIds: readonly string[]): Promise<boolean> {
    if (batchIds.length === 0) return false;
    const [row] = await queryPrepared<{ listening: boolean }>(m, LISTENING, [batchIds]);
    return row.listening === true;
  }

  /**
   * One statement per group of successes once the group's batches are known: every ended
   * task becomes an event and the insert's join keeps those some endpoint subscribes to. The
   * group commit holds its rows' locks until this returns, so round trips here slow the
   * whole pipeline; a batch's shape is read once and kept (it never changes).
   */
  async record(m: EntityManager, outcomes: TaskOutcomes): Promise<void> {
    const shapes = await this.shapesOf(
      m,
      outcomes.ended.map((e) => e.task.batchId),
    );
    const events: OutboxEvent[] = [];
    for (const { accountId, task } of outcomes.ended) {
      const type: WebhookEventType | null =
        task.status === 'succeeded' ? 'task.succeeded' : task.status === 'failed' ? 'task.failed' : null;
      const shape = shapes.get(task.batchId);
      // The API's task object, cancelling included: an ended task is never waiting on an upstream cancel.
      if (type && shape)
        events.push(newEvent(accountId, type, taskObject({ ...task, cancelling: false, ...taskPosition(task.seq, shape) })));
    }
    // A batch finishes once: its full row is read then, for the batch.completed body.
    const finished =
      outcomes.finishedBatchIds.length > 0 ? await m.getRepository(BatchEntity).findBy({ id: In(outcomes.finishedBatchIds) }) : [];
    // The write that finished the batch has just set its counts: nothing is waiting or running.
    for (const b of finished) events.push(newEvent(b.accountId, 'batch.completed', batchObject(storedBatchView(b))));
    await this.insert(m, events);
  }

  /** Writes events (in the caller's transaction); one delivery per subscribed endpoint. */
  async insert(m: DataSource | EntityManager, events: readonly OutboxEvent[]): Promise<void> {
    await writeOutboxEvents(m, events);
  }

  private async shapesOf(m: EntityManager, batchIds: readonly string[]): Promise<Map<string, BatchShape>> {
    const missing = [...new Set(batchIds)].filter((id) => !this.shapes.has(id));
    if (missing.length > 0) {
      const rows = await queryPrepared<{ id: string; ref_mode: BatchShape['refMode']; ref_images: string[]; count_per_combo: number }>(
        m,
        BATCH_SHAPES,
        [missing],
      );
      for (const r of rows) {
        this.shapes.set(r.id, { refMode: r.ref_mode, refImages: r.ref_images, countPerCombo: r.count_per_combo });
        // Oldest first out: a Map iterates in insertion order.
        if (this.shapes.size > MAX_SHAPES) this.shapes.delete(this.shapes.keys().next().value!);
      }
    }
    return this.shapes;
  }
}
