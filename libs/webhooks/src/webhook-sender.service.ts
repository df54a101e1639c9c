import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { PreparedStatement, queryPrepared } from '@app/database';
import { egressRequest, isEgressError } from '@app/egress';
import { KilnMetrics } from '@app/metrics';
import { SecretBox, signatureHeader } from './webhook-secret';

/** Deliveries one generator takes per round (and sends at once). */
const ROUND_SIZE = 50;
/** The answer's body is not used; a longer one is cut off (and the attempt fails). */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** At most one warning per this long while PostgreSQL keeps failing. */
const WARN_EVERY_MS = 30_000;
/**
 * Deliveries yield to the work the process exists for. After a full round (more are due), the
 * next one waits when that work is in flight and the event loop was at least BUSY_LOOP busy
 * during the round: YIELD_FACTOR times the round's own duration (8: deliveries keep about a
 * ninth of a saturated loop), within YIELD_MIN_MS..YIELD_MAX_MS so that they never stop.
 * Measured in bench/ (webhooks): a 1,000-image pipeline with one delivery per image went from
 * 0.72-0.88 of the pipeline without endpoints to 0.88-1.04 with this and the one-statement
 * outbox (0.72-0.79 with the outbox alone); the deliveries then end 0.3-0.8 s after the last
 * render instead of 0.2-0.7 s (bench/findings.md).
 */
const BUSY_LOOP = 0.7;
const YIELD_FACTOR = 8;
const YIELD_MIN_MS = 10;
const YIELD_MAX_MS = 250;

/** The pause before the next full round (see BUSY_LOOP): 0 unless renders compete for the loop. */
export function deliveryPauseMs(round: { ms: number; loopUtilization: number; busy: boolean }): number {
  if (!round.busy || round.loopUtilization < BUSY_LOOP) return 0;
  return Math.min(YIELD_MAX_MS, Math.max(YIELD_MIN_MS, Math.round(round.ms * YIELD_FACTOR)));
}

export interface WebhookSenderOptions {
  /**
   * True while the process has work that comes before deliveries (the generator: renders in
   * flight). Without it, full rounds follow each other at once.
   */
  busy?: () => boolean;
}

/**
 * Takes due deliveries for one attempt each: locked with SKIP LOCKED so generators never take
 * the same row, and leased by moving next_attempt_at past the attempt's end. A generator that
 * dies mid-attempt leaves the row due again once the lease ends, with the same event id:
 * at least once, delayed by the lease and never lost. $1 how many, $2 the lease in ms.
 */
const CLAIM: PreparedStatement = {
  name: 'kiln_webhook_claim',
  text: `
WITH due AS (
  SELECT id FROM webhook_deliveries
   WHERE status = 'pending' AND next_attempt_at <= now()
   ORDER BY next_attempt_at
   LIMIT $1
   FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + $2 * interval '1 millisecond'
    FROM due WHERE d.id = due.id
  RETURNING d.id, d.event_id, d.endpoint_id, d.body, d.attempts
)
SELECT c.*, e.id AS found, e.url, e.secret_enc, e.previous_secret_enc,
       (e.previous_secret_expires_at > now()) AS previous_signs, e.disabled_at
  FROM claimed c LEFT JOIN webhook_endpoints e ON e.id = c.endpoint_id`,
};

interface Claimed {
  id: string;
  event_id: string;
  endpoint_id: string;
  body: string;
  attempts: number;
  found: string | null;
  url: string;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_signs: boolean | null;
  disabled_at: Date | null;
}

type Outcome = { delivered: true; statusCode: number } | { delivered: false; statusCode: number | null; error: string };

/** A round's successes, fenced each on its attempt. $1 ids, $2 attempts, $3 status codes. */
const DELIVERED_GROUP: PreparedStatement = {
  name: 'kiln_webhook_delivered_group',
  text: `
UPDATE webhook_deliveries d SET status = 'delivered', delivered_at = now(), next_attempt_at = NULL,
       last_status_code = i.code, last_error = NULL
  FROM unnest($1::uuid[], $2::int[], $3::int[]) AS i(id, attempts, code)
 WHERE d.id = i.id AND d.attempts = i.attempts AND d.status = 'pending'`,
};

/** Every write after the claim is fenced on the attempt, so a late answer of a lost lease changes nothing. */
const FENCE = `id = $1 AND attempts = $2 AND status = 'pending'`;

/**
 * The generator's webhook sender: due deliveries from the outbox, signed per Standard
 * Webhooks, POSTed through the egress module (the address checked again at every attempt and
 * connected to as checked, no redirects, WEBHOOK_TIMEOUT_MS), then delivered, retried after
 * WEBHOOK_RETRY_DELAYS_MS or failed; a 410 disables the endpoint.
 */
@Injectable()
export class WebhookSender {
  private readonly logger = new Logger(WebhookSender.name);
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<number> | null = null;
  private lastWarning = 0;
  private busy: () => boolean = () => false;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly box: SecretBox,
    @Optional() private readonly metrics?: KilnMetrics,
  ) {}

  async start(options: WebhookSenderOptions = {}): Promise<void> {
    if (!this.stopped) return;
    if (options.busy) this.busy = options.busy;
    if (!this.box.ready) {
      this.logger.warn('WEBHOOK_SECRET_KEY is not set: webhook deliveries are not sent (they wait in the outbox)');
      return;
    }
    if (this.config.webhooks.allowPrivate) this.logger.warn('WEBHOOK_ALLOW_PRIVATE is on: webhooks may reach http and private addresses');
    this.stopped = false;
    await this.resealSecrets().catch((err) => this.logger.warn(`Could not re-encrypt webhook secrets: ${(err as Error).message}`));
    this.tick();
  }

  /** Stops taking deliveries and waits for the round in flight (bounded by the attempt timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.current;
  }

  /** One round: takes up to ROUND_SIZE due deliveries and makes one attempt at each. Resolves with how many. */
  deliverDue(): Promise<number> {
    this.current ??= this.round().finally(() => {
      this.current = null;
    });
    return this.current;
  }

  private tick(): void {
    if (this.stopped) return;
    const startedAt = performance.now();
    const loopAtStart = performance.eventLoopUtilization();
    void this.deliverDue()
      .catch((err) => {
        if (Date.now() - this.lastWarning >= WARN_EVERY_MS) {
          this.lastWarning = Date.now();
          this.logger.warn(`Could not take webhook deliveries: ${(err as Error).message}`);
        }
        return 0;
      })
      .then((taken) => {
        // A full round means more are probably due: go again at once, or after a pause that
        // leaves the loop to the renders.
        const round = { ms: performance.now() - startedAt, loopUtilization: performance.eventLoopUtilization(loopAtStart).utilization, busy: this.busy() };
        const next = taken >= ROUND_SIZE ? deliveryPauseMs(round) : this.config.webhooks.pollIntervalMs;
        if (!this.stopped) this.timer = setTimeout(() => this.tick(), next);
      });
  }

  private async round(): Promise<number> {
    const lease = 2 * this.config.webhooks.timeoutMs + 5000;
    const claimed = await queryPrepared<Claimed>(this.db, CLAIM, [ROUND_SIZE, lease]);
    const delivered: { c: Claimed; statusCode: number }[] = [];
    // The endpoint was deleted (its row alone goes; its deliveries are swept later): nobody to
    // send these to, and after a delete there may be thousands, so they go in one statement.
    const orphaned = claimed.filter((c) => !c.found).map((c) => c.id);
    if (orphaned.length > 0) await this.db.query(`DELETE FROM webhook_deliveries WHERE id = ANY($1::uuid[])`, [orphaned]);
    // A round's deliveries mostly go to a few endpoints: each endpoint's secrets are decrypted once.
    const secrets = new Map<string, string[]>();
    await Promise.all(
      claimed
        .filter((c) => c.found)
        .map(async (c) => {
          const outcome = await this.attempt(c, secrets);
          if (outcome?.delivered) delivered.push({ c, statusCode: outcome.statusCode });
        }),
    );
    // Successes, the common case, are recorded together: one statement per round, not per delivery.
    if (delivered.length > 0) {
      await queryPrepared(this.db, DELIVERED_GROUP, [delivered.map((d) => d.c.id), delivered.map((d) => d.c.attempts), delivered.map((d) => d.statusCode)]);
    }
    return claimed.length;
  }

  /** One attempt (its endpoint exists); returns a success for the round to record, having recorded anything else itself. */
  private async attempt(c: Claimed, secrets: Map<string, string[]>): Promise<Outcome | null> {
    try {
      if (c.disabled_at) {
        await this.db.query(`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = $3 WHERE ${FENCE}`, [
          c.id,
          c.attempts,
          'The endpoint is disabled',
        ]);
        return null;
      }
      let signing = secrets.get(c.endpoint_id);
      if (!signing) {
        signing = [this.box.open(c.secret_enc, c.endpoint_id)];
        if (c.previous_secret_enc && c.previous_signs) signing.push(this.box.open(c.previous_secret_enc, c.endpoint_id));
        secrets.set(c.endpoint_id, signing);
      }
      const outcome = await this.send(c, signing);
      this.metrics?.webhookAttempts.inc({ result: outcome.delivered ? 'delivered' : outcome.statusCode === null ? 'network_error' : 'http_error' });
      if (outcome.delivered) return outcome;
      await this.recordFailure(c, outcome);
      return null;
    } catch (err) {
      // The lease runs out and another round retries it.
      this.logger.warn(`Webhook delivery ${c.id} attempt ${c.attempts}: ${(err as Error).message}`);
      return null;
    }
  }

  private async send(c: Claimed, secrets: string[]): Promise<Outcome> {
    const timestamp = Math.floor(Date.now() / 1000);
    try {
      const res = await egressRequest(c.url, {
        policy: { allowPrivate: this.config.webhooks.allowPrivate, allowSetting: 'WEBHOOK_ALLOW_PRIVATE' },
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Kiln-Webhooks/1',
          'webhook-id': c.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, c.event_id, timestamp, c.body),
        },
        body: Buffer.from(c.body, 'utf8'),
        maxBytes: MAX_ANSWER_BYTES,
        timeoutMs: this.config.webhooks.timeoutMs,
        // An endpoint gets many deliveries (one per task with task.succeeded): one connection for them.
        keepAlive: true,
      });
      if (res.status >= 200 && res.status < 300) return { delivered: true, statusCode: res.status };
      return { delivered: false, statusCode: res.status, error: `HTTP ${res.status}` };
    } catch (err) {
      if (!isEgressError(err)) throw err;
      return { delivered: false, statusCode: null, error: `${err.reason}: ${err.message}` };
    }
  }

  private async recordFailure(c: Claimed, outcome: Extract<Outcome, { delivered: false }>): Promise<void> {
    if (outcome.statusCode === 410) {
      await this.disable(c);
      return;
    }
    const delays = this.config.webhooks.retryDelaysMs;
    const delay = c.attempts <= delays.length ? delays[c.attempts - 1] : null;
    await this.db.query(
      `UPDATE webhook_deliveries
          SET status = CASE WHEN $5::int IS NULL THEN 'failed' ELSE 'pending' END,
              next_attempt_at = CASE WHEN $5::int IS NULL THEN NULL ELSE now() + $5::int * interval '1 millisecond' END,
              last_status_code = $3, last_error = $4
        WHERE ${FENCE}`,
      [c.id, c.attempts, outcome.statusCode, outcome.error.slice(0, 500), delay],
    );
  }

  /** 410 Gone: the endpoint is disabled, and nothing more is sent to it. */
  private async disable(c: Claimed): Promise<void> {
    await this.db.transaction(async (m) => {
      await m.query(`UPDATE webhook_endpoints SET disabled_at = COALESCE(disabled_at, now()) WHERE id = $1`, [c.endpoint_id]);
      await m.query(
        `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_status_code = 410, last_error = 'HTTP 410: endpoint disabled'
          WHERE ${FENCE}`,
        [c.id, c.attempts],
      );
      await m.query(
        `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = 'The endpoint is disabled'
          WHERE endpoint_id = $1 AND status = 'pending' AND id <> $2`,
        [c.endpoint_id, c.id],
      );
    });
    this.logger.log(`Webhook endpoint ${c.endpoint_id} answered 410 Gone: disabled`);
  }

  /**
   * Secrets sealed under a previous WEBHOOK_SECRET_KEY are sealed again under the current one,
   * so the previous key can be dropped once a generator has started with both.
   */
  private async resealSecrets(): Promise<void> {
    const rows: { id: string; secret_enc: string; previous_secret_enc: string | null }[] = await this.db.query(
      `SELECT id, secret_enc, previous_secret_enc FROM webhook_endpoints`,
    );
    let resealed = 0;
    for (const r of rows) {
      const stale = !this.box.isCurrent(r.secret_enc) || (r.previous_secret_enc !== null && !this.box.isCurrent(r.previous_secret_enc));
      if (!stale) continue;
      const secret = this.box.seal(this.box.open(r.secret_enc, r.id), r.id);
      const previous = r.previous_secret_enc ? this.box.seal(this.box.open(r.previous_secret_enc, r.id), r.id) : null;
      await this.db.query(
        `UPDATE webhook_endpoints SET secret_enc = $2, previous_secret_enc = $3 WHERE id = $1 AND secret_enc = $4`,
        [r.id, secret, previous, r.secret_enc],
      );
      resealed++;
    }
    if (resealed > 0) this.logger.log(`Re-encrypted ${resealed} webhook secret(s) under the current WEBHOOK_SECRET_KEY`);
  }
}
