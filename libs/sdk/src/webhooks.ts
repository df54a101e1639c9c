import { createHmac, timingSafeEqual } from 'node:crypto';
import { KilnWebhookVerificationError } from './errors';
import type { KilnHttp } from './http';
import type { CreatedWebhook, CreateWebhookRequest, WebhookDelivery, WebhookEndpoint, WebhookEvent } from './types';

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/** How far a delivery's timestamp may be from now: older ones may be replays. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const entry = Object.entries(headers as Record<string, string | string[] | undefined>).find(([k]) => k.toLowerCase() === name);
  const value = entry?.[1];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Checks a delivery the Standard Webhooks way: the HMAC-SHA256 of `<id>.<timestamp>.<body>`,
 * keyed with the secret's base64 part after `whsec_`, must match one of the `v1,` signatures
 * (several during a secret rotation), and the timestamp must be recent. `body` is the raw
 * request body, before any JSON parsing (re-serialised JSON would not match). Returns the event.
 */
export function verifyWebhook<T = unknown>(
  body: string | Buffer | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
  options: { toleranceSeconds?: number; now?: Date } = {},
): WebhookEvent<T> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures)
    throw new KilnWebhookVerificationError('Missing webhook-id, webhook-timestamp or webhook-signature');
  const seconds = Number(timestamp);
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (!Number.isInteger(seconds) || Math.abs(now - seconds) > (options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS)) {
    throw new KilnWebhookVerificationError('Webhook timestamp is too old or too new');
  }
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(payload).digest();
  const matches = signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',', 2);
    if (version !== 'v1' || !signature) return false;
    const given = Buffer.from(signature, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new KilnWebhookVerificationError('No webhook signature matches the secret');
  return JSON.parse(payload.toString('utf8')) as WebhookEvent<T>;
}

/** The account's webhook endpoints (`/v1/webhooks`). */
export class WebhooksResource {
  constructor(private readonly http: KilnHttp) {}

  /** Creating twice makes two endpoints, so a create whose answer was lost is not repeated. */
  async create(body: CreateWebhookRequest): Promise<CreatedWebhook> {
    return (await this.http.json<CreatedWebhook>('POST', '/v1/webhooks', { body })).body;
  }

  async list(): Promise<WebhookEndpoint[]> {
    return (await this.http.json<{ endpoints: WebhookEndpoint[] }>('GET', '/v1/webhooks', { repeatable: true })).body.endpoints;
  }

  async delete(id: string): Promise<void> {
    await this.http.json('DELETE', `/v1/webhooks/${encodeURIComponent(id)}`, { repeatable: true });
  }

  async rotateSecret(id: string): Promise<{ secret: string }> {
    return (await this.http.json<{ secret: string }>('POST', `/v1/webhooks/${encodeURIComponent(id)}/rotate-secret`)).body;
  }

  /** Sends a `ping` event to the endpoint; answers its delivery (follow it with `deliveries`). */
  async test(id: string): Promise<WebhookDelivery> {
    return (await this.http.json<{ delivery: WebhookDelivery }>('POST', `/v1/webhooks/${encodeURIComponent(id)}/test`)).body.delivery;
  }

  /** Every delivery to the endpoint, newest first, across all pages. */
  async *deliveries(id: string, options: { pageSize?: number } = {}): AsyncGenerator<WebhookDelivery> {
    let cursor: string | undefined;
    do {
      const page = await this.http.json<{ deliveries: WebhookDelivery[]; nextCursor: string | null }>(
        'GET',
        `/v1/webhooks/${encodeURIComponent(id)}/deliveries`,
        { query: { limit: options.pageSize, cursor }, repeatable: true },
      );
      yield* page.body.deliveries;
      cursor = page.body.nextCursor ?? undefined;
    } while (cursor);
  }
}
