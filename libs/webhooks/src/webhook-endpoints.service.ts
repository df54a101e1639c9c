import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import {
  Cursor,
  encodeCursor,
  isUuid,
  queryRows,
  WebhookDeliveryEntity,
  WebhookDeliveryStatus,
  WebhookEndpointEntity,
} from '@app/database';
import { checkEgressTarget, isEgressError } from '@app/egress';
import { ErrorCode, invalidRequest, KilnError, notFound } from '@app/errors';
import { DEFAULT_WEBHOOK_EVENTS, newEvent, WebhookEventType } from './webhook-events';
import { WebhookOutbox } from './webhook-outbox';
import { newSigningSecret, SecretBox } from './webhook-secret';

/** Most endpoints one account may have. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 10;
/** How long the secret before a rotation keeps signing deliveries. */
export const PREVIOUS_SECRET_MS = 24 * 60 * 60 * 1000;
/** The name lookup of a URL being registered. */
const URL_CHECK_TIMEOUT_MS = 5000;

export type WebhookEndpoint = Pick<
  WebhookEndpointEntity,
  'id' | 'url' | 'events' | 'description' | 'createdAt' | 'disabledAt' | 'consecutiveFailures' | 'circuitOpenUntil'
>;

export interface NewEndpoint {
  url: string;
  events?: WebhookEventType[];
  description?: string | null;
}

export type WebhookDelivery = Pick<
  WebhookDeliveryEntity,
  'eventId' | 'type' | 'attempts' | 'status' | 'lastStatusCode' | 'lastError' | 'nextAttemptAt' | 'deliveredAt'
>;

const ENDPOINT_COLUMNS = `id, url, events, description, created_at AS "createdAt", disabled_at AS "disabledAt",
  consecutive_failures AS "consecutiveFailures", circuit_open_until AS "circuitOpenUntil"`;

/** An account's webhook endpoints: registration, rotation, test pings and the delivery log. */
@Injectable()
export class WebhookEndpointsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly box: SecretBox,
    private readonly outbox: WebhookOutbox,
  ) {}

  /** Registers an endpoint; the secret is returned here and never again. */
  async create(accountId: string, input: NewEndpoint): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    this.requireSecretKey();
    await this.checkUrl(input.url);
    const id = randomUUID();
    const secret = newSigningSecret();
    const endpoint = await this.db.transaction(async (m) => {
      // The account row serialises concurrent registrations, so the limit holds under races.
      await m.query(`SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, [accountId]);
      const [{ n }] = await queryRows<{ n: number }>(m, `SELECT count(*)::int AS n FROM webhook_endpoints WHERE account_id = $1`, [
        accountId,
      ]);
      if (n >= MAX_ENDPOINTS_PER_ACCOUNT) {
        throw new KilnError(ErrorCode.EndpointLimitExceeded, `An account may have at most ${MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints`, {
          limit: MAX_ENDPOINTS_PER_ACCOUNT,
        });
      }
      const [row] = await queryRows<WebhookEndpoint>(
        m,
        `INSERT INTO webhook_endpoints (id, account_id, url, events, description, secret_enc)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${ENDPOINT_COLUMNS}`,
        [id, accountId, input.url, input.events ?? DEFAULT_WEBHOOK_EVENTS, input.description ?? null, this.box.seal(secret, id)],
      );
      return row;
    });
    return { endpoint, secret };
  }

  async list(accountId: string): Promise<WebhookEndpoint[]> {
    return this.db.query(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE account_id = $1 ORDER BY created_at, id`, [accountId]);
  }

  /**
   * Deletes the endpoint: its pending deliveries are never sent (the sender drops what it
   * claims for a missing endpoint) and its log is unreachable at once and removed by the
   * generators' hourly sweep (sweepWebhookDeliveries), so this stays one small statement
   * however long the log.
   */
  async remove(accountId: string, id: string): Promise<void> {
    const [gone] = await queryRows(this.db, `DELETE FROM webhook_endpoints WHERE id = $1 AND account_id = $2 RETURNING id`, [
      this.endpointId(id),
      accountId,
    ]);
    if (!gone) throw notFound('Webhook endpoint');
  }

  /** A new secret; the one it replaces keeps signing (beside it) for PREVIOUS_SECRET_MS. */
  async rotateSecret(accountId: string, id: string): Promise<string> {
    this.requireSecretKey();
    const secret = newSigningSecret();
    const [row] = await queryRows<{ id: string }>(
      this.db,
      `UPDATE webhook_endpoints
          SET previous_secret_enc = secret_enc, previous_secret_expires_at = now() + $3 * interval '1 millisecond', secret_enc = $4
        WHERE id = $1 AND account_id = $2
        RETURNING id`,
      [this.endpointId(id), accountId, PREVIOUS_SECRET_MS, this.box.seal(secret, id)],
    );
    if (!row) throw notFound('Webhook endpoint');
    return secret;
  }

  /** Queues a `ping` to this endpoint only; the generator sends it like any event. */
  async sendTest(accountId: string, id: string): Promise<WebhookDelivery> {
    const endpoint = await this.find(accountId, id);
    const event = newEvent(accountId, 'ping', { endpointId: endpoint.id });
    const [row] = await queryRows<WebhookDelivery>(
      this.db,
      `INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, type, body, next_attempt_at)
       VALUES ($1, $2, $3, 'ping', $4, now()) RETURNING ${DELIVERY_COLUMNS}`,
      [event.id, endpoint.id, accountId, event.body],
    );
    return row;
  }

  /** The endpoint (its circuit tells why deliveries may wait) and its deliveries, newest first, keyset-paged. */
  async deliveries(
    accountId: string,
    id: string,
    limit: number,
    cursor: Cursor | null,
  ): Promise<{ endpoint: WebhookEndpoint; deliveries: WebhookDelivery[]; nextCursor: string | null }> {
    const endpoint = await this.find(accountId, id);
    const rows: (WebhookDelivery & { id: string; createdAt: Date })[] = await this.db.query(
      `SELECT id, created_at AS "createdAt", ${DELIVERY_COLUMNS} FROM webhook_deliveries
        WHERE endpoint_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [endpoint.id, cursor?.createdAt ?? null, cursor?.id ?? null, limit + 1],
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      endpoint,
      deliveries: page.map(({ id: _id, createdAt: _at, ...d }) => d),
      nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
    };
  }

  /**
   * Deliveries due and not yet taken by a sender, and how long the oldest has waited (0 when
   * none): the operator's view of delivery lag, which grows while renders saturate the
   * generators (deliveries yield to them) or while no generator sends. Deliveries held by an
   * open circuit are not counted there (their endpoint is down, not Kiln behind), but the
   * open circuits are. One read of the partial index of pending deliveries.
   */
  async backlog(): Promise<{ due: number; lagSeconds: number; circuitsOpen: number }> {
    const [row] = await queryRows<{ due: number; lag: number; open: number }>(
      this.db,
      `WITH shut AS (SELECT COALESCE(array_agg(id), '{}') AS ids FROM webhook_endpoints WHERE circuit_open_until > now())
       SELECT count(*)::int AS due, COALESCE(EXTRACT(EPOCH FROM now() - min(next_attempt_at)), 0)::float8 AS lag,
              (SELECT cardinality(ids) FROM shut)::int AS open
         FROM webhook_deliveries, shut WHERE status = 'pending' AND next_attempt_at <= now() AND endpoint_id <> ALL(shut.ids)`,
    );
    return { due: row.due, lagSeconds: row.lag, circuitsOpen: row.open };
  }

  private async find(accountId: string, id: string): Promise<WebhookEndpoint> {
    const [row] = await queryRows<WebhookEndpoint>(
      this.db,
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND account_id = $2`,
      [this.endpointId(id), accountId],
    );
    if (!row) throw notFound('Webhook endpoint');
    return row;
  }

  /** An id that is not a uuid names no endpoint (and must not reach PostgreSQL's cast). */
  private endpointId(id: string): string {
    if (!isUuid(id)) throw notFound('Webhook endpoint');
    return id;
  }

  private requireSecretKey(): void {
    if (!this.box.ready) {
      throw new KilnError(
        ErrorCode.ServiceUnavailable,
        'Webhooks are not configured on this server: the operator must set WEBHOOK_SECRET_KEY',
      );
    }
  }

  /** https on public addresses only (unless WEBHOOK_ALLOW_PRIVATE), checked after resolving the host. */
  private async checkUrl(url: string): Promise<void> {
    try {
      await checkEgressTarget(
        url,
        { allowPrivate: this.config.webhooks.allowPrivate, allowSetting: 'WEBHOOK_ALLOW_PRIVATE' },
        { signal: AbortSignal.timeout(URL_CHECK_TIMEOUT_MS) },
      );
    } catch (err) {
      if (!isEgressError(err)) throw invalidRequest('url', 'unresolvable', "The URL's host name did not resolve in time");
      const reason = err.reason === 'bad_url' ? 'invalid_url' : err.reason;
      throw invalidRequest('url', reason, `Webhook URL refused: ${err.message}`);
    }
  }
}

const DELIVERY_COLUMNS = `event_id AS "eventId", type, attempts, status, last_status_code AS "lastStatusCode",
  last_error AS "lastError", next_attempt_at AS "nextAttemptAt", delivered_at AS "deliveredAt"`;

export type { WebhookDeliveryStatus };
