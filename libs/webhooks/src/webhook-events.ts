import { randomUUID } from 'node:crypto';

/** Event types an endpoint may subscribe to. `ping` is sent by the test route. */
export const WEBHOOK_EVENT_TYPES = [
  'batch.completed',
  'task.succeeded',
  'task.failed',
  'credits.low',
  'key.budget.threshold',
  'ping',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** What an endpoint gets when it names no events. */
export const DEFAULT_WEBHOOK_EVENTS: WebhookEventType[] = ['batch.completed'];

/** An event ready for the outbox: its id, type and the exact body every attempt sends. */
export interface OutboxEvent {
  id: string;
  accountId: string;
  type: WebhookEventType;
  body: string;
}

/** The body `{ id, type, createdAt (Unix ms), data }`, serialised once so every attempt signs the same bytes. */
export function newEvent(accountId: string, type: WebhookEventType, data: unknown, now = Date.now()): OutboxEvent {
  const id = `evt_${randomUUID().replace(/-/g, '')}`;
  return { id, accountId, type, body: JSON.stringify({ id, type, createdAt: now, data }) };
}
