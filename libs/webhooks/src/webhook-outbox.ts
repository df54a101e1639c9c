import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager, In } from 'typeorm';
import { batchObject, toBatchView } from '@app/batches';
import { BatchEntity, PreparedStatement, queryPrepared } from '@app/database';
import { TaskOutcomeHook, TaskOutcomes, taskObject, taskPosition } from '@app/tasks';
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

/** Run before every group of task successes (TaskOutcomeHook.listening). */
const LISTENING: PreparedStatement = {
  name: 'kiln_webhook_listening',
  text: `SELECT EXISTS (
           SELECT 1 FROM batches b JOIN webhook_endpoints e ON e.account_id = b.account_id AND e.disabled_at IS NULL
            WHERE b.id = ANY($1::uuid[])) AS listening`,
};

const SUBSCRIPTIONS: PreparedStatement = {
  name: 'kiln_webhook_subscriptions',
  text: `SELECT account_id, events FROM webhook_endpoints WHERE account_id = ANY($1::uuid[]) AND disabled_at IS NULL`,
};

/**
 * The outbox: events are written in the transaction of the change they report, so a change
 * that commits has its deliveries and one that rolls back has none. The generator's sender
 * (WebhookSender) takes them from there. Registered as the tasks lib's TaskOutcomeHook.
 */
@Injectable()
export class WebhookOutbox implements TaskOutcomeHook {
  async listening(m: DataSource | EntityManager, batchIds: readonly string[]): Promise<boolean> {
    if (batchIds.length === 0) return false;
    const [row] = await queryPrepared<{ listening: boolean }>(m, LISTENING, [batchIds]);
    return row.listening === true;
  }

  async record(m: EntityManager, outcomes: TaskOutcomes): Promise<void> {
    const accountIds = new Set(outcomes.ended.map((e) => e.accountId));
    // One read for the finished batches and for the shape that places each ended task in its batch.
    const batchIds = [...new Set([...outcomes.finishedBatchIds, ...outcomes.ended.map((e) => e.task.batchId)])];
    const read = batchIds.length > 0 ? await m.getRepository(BatchEntity).findBy({ id: In(batchIds) }) : [];
    const byId = new Map(read.map((b) => [b.id, b]));
    const finished = new Set(outcomes.finishedBatchIds);
    const batches = read.filter((b) => finished.has(b.id));
    for (const b of batches) accountIds.add(b.accountId);
    const wanted = await this.subscriptions(m, [...accountIds]);
    const wants = (accountId: string, type: WebhookEventType) => wanted.get(accountId)?.has(type) ?? false;

    const events: OutboxEvent[] = [];
    for (const { accountId, task } of outcomes.ended) {
      const type = task.status === 'succeeded' ? 'task.succeeded' : task.status === 'failed' ? 'task.failed' : null;
      const batch = byId.get(task.batchId);
      if (type && batch && wants(accountId, type)) {
        events.push(newEvent(accountId, type, taskObject({ ...task, ...taskPosition(task.seq, batch) })));
      }
    }
    for (const b of batches) {
      if (!wants(b.accountId, 'batch.completed')) continue;
      // The write that finished the batch has just set its counts: nothing is waiting or running.
      const settled = b.succeededCount + b.failedCount + b.cancelledCount;
      const counts = {
        pending: Math.max(0, b.total - settled),
        running: 0,
        succeeded: b.succeededCount,
        failed: b.failedCount,
        cancelled: b.cancelledCount,
      };
      events.push(newEvent(b.accountId, 'batch.completed', batchObject(toBatchView(b, counts))));
    }
    await this.insert(m, events);
  }

  /** Writes events (in the caller's transaction); one delivery per subscribed endpoint. */
  async insert(m: DataSource | EntityManager, events: readonly OutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    await queryPrepared(m, INSERT_DELIVERIES, [events.map((e) => e.id), events.map((e) => e.accountId), events.map((e) => e.type), events.map((e) => e.body)]);
  }

  /** Event types each account's enabled endpoints subscribe to. */
  private async subscriptions(m: EntityManager, accountIds: string[]): Promise<Map<string, Set<string>>> {
    const rows = await queryPrepared<{ account_id: string; events: string[] }>(m, SUBSCRIPTIONS, [accountIds]);
    const wanted = new Map<string, Set<string>>();
    for (const r of rows) {
      const set = wanted.get(r.account_id) ?? new Set<string>();
      for (const e of r.events) set.add(e);
      wanted.set(r.account_id, set);
    }
    return wanted;
  }
}
