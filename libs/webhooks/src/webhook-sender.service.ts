import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { PreparedStatement, queryPrepared } from '@app/database';
import { egressRequest, isEgressError } from '@app/egress';
import { KilnMetrics } from '@app/metrics';
import { SecretBox, signatureHeader } from './webhook-secret';

/** The answer's body is not used; a longer one is cut off (and the attempt fails). */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** At most one warning per this long while PostgreSQL keeps failing. */
const WARN_EVERY_MS = 30_000;
/** An open circuit's cooldown doubles after each failed probe, up to this. */
const MAX_CIRCUIT_COOLDOWN_MS = 60 * 60 * 1000;
/**
 * Deliveries yield to the work the process exists for. After a full claim (more are due), the
 * next one waits when that work is in flight and the event loop was at least BUSY_LOOP busy
 * since the previous claim: YIELD_FACTOR times that cycle's duration (8: deliveries keep about
 * a ninth of a saturated loop), within YIELD_MIN_MS..YIELD_MAX_MS so that they never stop.
 * Measured in bench/ (webhooks): a 1,000-image pipeline with one delivery per image went from
 * 0.72-0.88 of the pipeline without endpoints to 0.88-1.04 with this and the one-statement
 * outbox (0.72-0.79 with the outbox alone); the deliveries then end 0.3-0.8 s after the last
 * render instead of 0.2-0.7 s (bench/findings.md).
 */
const BUSY_LOOP = 0.7;
const YIELD_FACTOR = 8;
const YIELD_MIN_MS = 10;
const YIELD_MAX_MS = 250;

/** The pause before the next full claim (see BUSY_LOOP): 0 unless renders compete for the loop. */
export function deliveryPauseMs(round: { ms: number; loopUtilization: number; busy: boolean }): number {
  if (!round.busy || round.loopUtilization < BUSY_LOOP) return 0;
  return Math.min(YIELD_MAX_MS, Math.max(YIELD_MIN_MS, Math.round(round.ms * YIELD_FACTOR)));
}

/**
 * The slots of one sender that one account's endpoints may hold together: WEBHOOK_ACCOUNT_CONCURRENCY,
 * never more than the sender has. Per sender, like the slots it shares: with N generators an
 * account holds at most N times this, and every generator keeps the rest for the others.
 */
export function accountShare(w: Pick<KilnConfig['webhooks'], 'accountConcurrency' | 'maxInFlight'>): number {
  return Math.min(w.accountConcurrency, w.maxInFlight);
}

/** Adds `by` to the count under `key`; a count back at 0 leaves the map. */
function count(counts: Map<string, number>, key: string, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n <= 0) counts.delete(key);
  else counts.set(key, n);
}

/** How long a circuit stays open after `failures` attempts in a row failed (`threshold` opened it). */
export function circuitCooldownMs(failures: number, threshold: number, baseMs: number): number {
  const doublings = Math.min(30, Math.max(0, failures - threshold));
  return Math.min(MAX_CIRCUIT_COOLDOWN_MS, baseMs * 2 ** doublings);
}

export interface WebhookSenderOptions {
  /**
   * True while the process has work that comes before deliveries (the generator: renders in
   * flight). Without it, full claims follow each other at once.
   */
  busy?: () => boolean;
}

/**
 * Takes due deliveries for one attempt each: locked with SKIP LOCKED so generators never take
 * the same row, and leased by moving next_attempt_at past the attempt's end. A generator that
 * dies mid-attempt leaves the row due again once the lease ends, with the same event id:
 * at least once, delayed by the lease and never lost.
 *
 * Every endpoint with a pending delivery gets a look (`pending`: one probe of
 * webhook_deliveries_endpoint_due_idx per endpoint, however long its backlog), so the cost is
 * bounded by the endpoints with work, never by the deliveries: no backlog can hide another
 * endpoint's deliveries behind it, as the oldest due deliveries of all did.
 *
 * Isolation between endpoints: each endpoint gives at most its room, its cap ($6; 1, the probe,
 * when it has failed $5 times in a row) less its attempts in flight here ($3, $4), and none
 * while its circuit is open. A probe holds the circuit for its lease, so generators never
 * probe the same endpoint at once.
 *
 * Fairness between accounts: one account's endpoints together hold at most $9 of this sender's
 * slots (its share, less its attempts in flight here: $7, $8), so an account with many
 * endpoints that never answer cannot hold every slot. The deliveries go in turns, not oldest
 * first: each account's first, then each one's second, the accounts with the fewest in flight
 * first (turn = in flight + rank within the account); within an account, its endpoints take
 * turns the same way (endpoint_turn), so its own backlog on one endpoint does not sit ahead of
 * its other endpoints. Each endpoint offers at most $1 / the
 * endpoints with work (at least one), so a claim reads about max($1, endpoints with work) rows
 * however long the backlogs. On 100,000 pending deliveries it took about 1 ms with 11
 * endpoints with work and 8-17 ms with 1,010 (EXPLAIN ANALYZE, generic and custom plans).
 * $1 how many, $2 the lease in ms.
 *
 * The claim commits synchronously (set_config(..., true): for its own transaction only), even
 * in the generator's sessions, whose commits are asynchronous (DatabaseModuleOptions.asyncCommit).
 * An asynchronous commit is visible to other sessions before its WAL reaches the disk, so a
 * claim could see, and send, the event of a success that a PostgreSQL crash then undoes: the
 * task runs again, its batch finishes again, and the receiver gets a second batch.completed
 * under a new webhook-id (chaos run, PostgreSQL kill). The claim's commit record comes after the
 * commit of every delivery it can see, so flushing the WAL up to it makes them all durable
 * before any is sent: one flush per claim, outside every task and batch lock.
 */
const CLAIM: PreparedStatement = {
  name: 'kiln_webhook_claim_v4',
  text: `
WITH RECURSIVE shut AS (
  SELECT COALESCE(array_agg(id), '{}') AS ids FROM webhook_endpoints WHERE circuit_open_until > now()
), pending AS (
  (SELECT w.endpoint_id FROM webhook_deliveries w WHERE w.status = 'pending' ORDER BY w.endpoint_id LIMIT 1)
  UNION ALL
  SELECT (SELECT w.endpoint_id FROM webhook_deliveries w
           WHERE w.status = 'pending' AND w.endpoint_id > p.endpoint_id ORDER BY w.endpoint_id LIMIT 1)
    FROM pending p WHERE p.endpoint_id IS NOT NULL
), open AS (
  SELECT p.endpoint_id, e.account_id, COALESCE(busy.n, 0) AS endpoint_busy, COALESCE(account.n, 0) AS account_busy,
         LEAST(CASE WHEN e.consecutive_failures >= $5 THEN 1 ELSE $6 END - COALESCE(busy.n, 0), $9 - COALESCE(account.n, 0)) AS room
    FROM pending p CROSS JOIN shut
    LEFT JOIN webhook_endpoints e ON e.id = p.endpoint_id
    LEFT JOIN unnest($3::uuid[], $4::int[]) AS busy(endpoint_id, n) ON busy.endpoint_id = p.endpoint_id
    LEFT JOIN unnest($7::uuid[], $8::int[]) AS account(account_id, n) ON account.account_id = e.account_id
   WHERE p.endpoint_id IS NOT NULL AND p.endpoint_id <> ALL(shut.ids)
), candidates AS (
  SELECT d.id, d.next_attempt_at, o.account_id, o.account_busy,
         o.endpoint_busy + row_number() OVER (PARTITION BY o.endpoint_id ORDER BY d.next_attempt_at) AS endpoint_turn
    FROM open o CROSS JOIN LATERAL (
      -- Index only (webhook_deliveries_endpoint_due_idx): the planner then prefers it to the
      -- due index, which it would read thinking this endpoint's deliveries are spread evenly.
      SELECT w.id, w.next_attempt_at FROM webhook_deliveries w
       WHERE w.endpoint_id = o.endpoint_id AND w.status = 'pending' AND w.next_attempt_at <= now()
       ORDER BY w.next_attempt_at
       LIMIT LEAST(o.room, GREATEST(1, $1 / (SELECT count(*) FROM open)))
    ) d
   WHERE o.room > 0
), turns AS (
  SELECT c.id, c.next_attempt_at, c.endpoint_turn,
         c.account_busy + row_number() OVER (PARTITION BY c.account_id ORDER BY c.endpoint_turn, c.next_attempt_at) AS turn
    FROM candidates c
), due AS (
  -- An array, not a join: by primary key whatever the plan thinks $1 may be.
  SELECT w.id FROM webhook_deliveries w
   WHERE w.id = ANY(ARRAY(SELECT t.id FROM turns t WHERE t.turn <= $9 ORDER BY t.turn, t.endpoint_turn, t.next_attempt_at LIMIT $1))
     AND w.status = 'pending' AND w.next_attempt_at <= now()
   FOR UPDATE OF w SKIP LOCKED
), claimed AS (
  UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + $2 * interval '1 millisecond'
    FROM due WHERE d.id = due.id
  RETURNING d.id, d.event_id, d.endpoint_id, d.account_id, d.body, d.attempts
), probing AS (
  UPDATE webhook_endpoints e SET circuit_open_until = now() + $2 * interval '1 millisecond'
    FROM claimed c WHERE e.id = c.endpoint_id AND e.consecutive_failures >= $5
  RETURNING e.id
)
SELECT c.*, e.id AS found, e.url, e.secret_enc, e.previous_secret_enc,
       (e.previous_secret_expires_at > now()) AS previous_signs, e.disabled_at,
       (e.consecutive_failures >= $5) AS probe, e.consecutive_failures AS failures,
       -- Evaluated for every row claimed, so whenever anything is: see above.
       set_config('synchronous_commit', 'on', true) AS durable
  FROM claimed c LEFT JOIN webhook_endpoints e ON e.id = c.endpoint_id`,
};

interface Claimed {
  id: string;
  event_id: string;
  endpoint_id: string;
  account_id: string;
  body: string;
  attempts: number;
  found: string | null;
  url: string;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_signs: boolean | null;
  disabled_at: Date | null;
  /** The endpoint's circuit was open: this attempt decides whether it closes. */
  probe: boolean | null;
  /** The endpoint's failed attempts in a row when this one was claimed. */
  failures: number | null;
}

type Outcome = { delivered: true; statusCode: number } | { delivered: false; statusCode: number | null; error: string };

/**
 * Successes, fenced each on its attempt; their endpoints' circuits close. $1 ids, $2 attempts,
 * $3 status codes. Those that finished while the previous group was being written go together.
 */
const DELIVERED_GROUP: PreparedStatement = {
  name: 'kiln_webhook_delivered_group_v2',
  text: `
WITH done AS (
  UPDATE webhook_deliveries d SET status = 'delivered', delivered_at = now(), next_attempt_at = NULL,
         last_status_code = i.code, last_error = NULL
    FROM unnest($1::uuid[], $2::int[], $3::int[]) AS i(id, attempts, code)
   WHERE d.id = i.id AND d.attempts = i.attempts AND d.status = 'pending'
  RETURNING d.endpoint_id
)
UPDATE webhook_endpoints e SET consecutive_failures = 0, circuit_open_until = NULL
 WHERE e.id IN (SELECT endpoint_id FROM done) AND (e.consecutive_failures > 0 OR e.circuit_open_until IS NOT NULL)`,
};

/**
 * A failed attempt: retried after its delay ($5, null: failed for good), and counted against
 * its endpoint. Failures that end while the circuit is open (attempts that were in flight when
 * it opened) are not counted again; a probe's failure reopens it for $8 ms; the failure that
 * reaches $6 in a row opens it for $7 ms.
 */
const FAILED: PreparedStatement = {
  name: 'kiln_webhook_failed',
  text: `
WITH d AS (
  UPDATE webhook_deliveries
     SET status = CASE WHEN $5::int IS NULL THEN 'failed' ELSE 'pending' END,
         next_attempt_at = CASE WHEN $5::int IS NULL THEN NULL ELSE now() + $5::int * interval '1 millisecond' END,
         last_status_code = $3, last_error = $4
   WHERE id = $1 AND attempts = $2 AND status = 'pending'
  RETURNING endpoint_id
)
UPDATE webhook_endpoints e
   SET consecutive_failures = CASE WHEN $9::boolean OR e.circuit_open_until IS NULL OR e.circuit_open_until <= now()
                                   THEN e.consecutive_failures + 1 ELSE e.consecutive_failures END,
       circuit_open_until = CASE
         WHEN $9::boolean THEN now() + $8::int * interval '1 millisecond'
         WHEN e.consecutive_failures + 1 >= $6 AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
           THEN now() + $7::int * interval '1 millisecond'
         ELSE e.circuit_open_until END
  FROM d WHERE e.id = d.endpoint_id
RETURNING e.consecutive_failures AS failures, e.circuit_open_until AS "openUntil",
          -- now() is this transaction's: an open time set by another attempt's statement differs.
          (e.circuit_open_until = now() + (CASE WHEN $9::boolean THEN $8::int ELSE $7::int END) * interval '1 millisecond') AS opened`,
};

/** Every write after the claim is fenced on the attempt, so a late answer of a lost lease changes nothing. */
const FENCE = `id = $1 AND attempts = $2 AND status = 'pending'`;

/**
 * The generator's webhook sender: due deliveries from the outbox, signed per Standard
 * Webhooks, POSTed through the egress module (the address checked again at every attempt and
 * connected to as checked, no redirects, WEBHOOK_TIMEOUT_MS), then delivered, retried after
 * WEBHOOK_RETRY_DELAYS_MS or failed; a 410 disables the endpoint.
 *
 * A continuous pipeline, not rounds: up to WEBHOOK_MAX_IN_FLIGHT attempts at once, at most
 * WEBHOOK_ENDPOINT_CONCURRENCY of them to one endpoint and WEBHOOK_ACCOUNT_CONCURRENCY to one
 * account's endpoints together, taken in turns by account; a freed slot is claimed again
 * without waiting for the slowest attempt. Endpoints that never answer hold only their own
 * slots and their account's share, so other accounts' deliveries and every retry keep their
 * schedule. Each success is
 * written as soon as it is known (those ending meanwhile go together), so a crash re-sends
 * only the attempts that were in flight. An endpoint that fails WEBHOOK_CIRCUIT_FAILURES
 * attempts in a row is left alone for WEBHOOK_CIRCUIT_COOLDOWN_MS (doubling after each failed
 * probe, up to an hour); then one attempt probes it, and a success reopens it to all.
 */
@Injectable()
export class WebhookSender {
  private readonly logger = new Logger(WebhookSender.name);
  private stopped = true;
  private loop: Promise<void> | null = null;
  private lastWarning = 0;
  private busy: () => boolean = () => false;
  /** Attempts in flight in this process, by endpoint and by account. */
  private readonly inFlight = new Map<string, number>();
  private readonly inFlightByAccount = new Map<string, number>();
  private inFlightTotal = 0;
  /** How many the last claim took: the attempts the next claim waits for (see sleep). */
  private lastTaken = 0;
  private readonly attempts = new Set<Promise<void>>();
  /** Wakes the loop early: a slot was freed (`now` false), or stop() was called. */
  private wake: ((now?: boolean) => void) | null = null;
  /** Successes waiting for the statement in flight to end; written together next. */
  private successes: { c: Claimed; statusCode: number }[] = [];
  private writing: Promise<void> | null = null;

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
    this.loop = this.run();
  }

  /** Stops claiming and waits for the attempts in flight (bounded by the attempt timeout) and their writes. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.(true);
    await this.loop;
    await this.settle();
  }

  /**
   * One claim, for a sender that is not started (tests): as many due deliveries as the caps
   * allow, one attempt at each, resolved once all are settled and written. Resolves with how many.
   */
  async deliverDue(): Promise<number> {
    const { taken } = await this.claimAndStart(this.config.webhooks.maxInFlight - this.inFlightTotal);
    await this.settle();
    return taken;
  }

  private async settle(): Promise<void> {
    while (this.attempts.size > 0) await Promise.all([...this.attempts]);
    await this.flushSuccesses();
  }

  private async run(): Promise<void> {
    const { maxInFlight, pollIntervalMs } = this.config.webhooks;
    let cycleStart = performance.now();
    let loopAtStart = performance.eventLoopUtilization();
    while (!this.stopped) {
      const free = maxInFlight - this.inFlightTotal;
      if (free <= 0) {
        await this.sleep(pollIntervalMs);
        continue;
      }
      let more = false;
      try {
        more = (await this.claimAndStart(free)).more;
      } catch (err) {
        if (Date.now() - this.lastWarning >= WARN_EVERY_MS) {
          this.lastWarning = Date.now();
          this.logger.warn(`Could not take webhook deliveries: ${(err as Error).message}`);
        }
      }
      if (this.stopped) break;
      if (!more) {
        await this.sleep(pollIntervalMs);
      } else {
        // More are probably due: claim again once a slot frees up, after a pause that leaves
        // the loop to the renders when they saturate it.
        const cycle = {
          ms: performance.now() - cycleStart,
          loopUtilization: performance.eventLoopUtilization(loopAtStart).utilization,
          busy: this.busy(),
        };
        const pause = deliveryPauseMs(cycle);
        // Not cut short by freed slots: the pause is what leaves the loop to the renders.
        if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
        if (this.inFlightTotal >= maxInFlight || this.anyAtCap()) await this.sleep(pollIntervalMs);
      }
      cycleStart = performance.now();
      loopAtStart = performance.eventLoopUtilization();
    }
  }

  /**
   * Waits `ms`, or less once half the attempts of the last claim have ended (so that the next
   * claim takes a group, not one delivery per statement) or the sender stops. Half of the last
   * claim's, not of all in flight: attempts that hang (an account at its share) never end, and
   * counting them kept every other endpoint waiting for the poll interval between groups.
   */
  private sleep(ms: number): Promise<void> {
    const waitingFor = this.lastTaken > 0 ? Math.min(this.inFlightTotal, this.lastTaken) : this.inFlightTotal;
    const enough = Math.max(1, Math.ceil(waitingFor / 2));
    let freed = 0;
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        if (this.wake === wake) this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      const wake = (now = false): void => {
        if (!now && ++freed < enough) return;
        this.wake = null;
        // Let the other attempts ending in the same tick free their slots too.
        setImmediate(done);
      };
      this.wake = wake;
    });
  }

  private static atCap(counts: Map<string, number>, cap: number): string[] {
    return [...counts].filter(([, n]) => n >= cap).map(([id]) => id);
  }

  /** Some endpoint or account has all the attempts it may have in flight here: the next claim skips it. */
  private anyAtCap(): boolean {
    const w = this.config.webhooks;
    return (
      WebhookSender.atCap(this.inFlight, w.endpointConcurrency).length > 0 ||
      WebhookSender.atCap(this.inFlightByAccount, accountShare(w)).length > 0
    );
  }

  /**
   * Claims up to `free` due deliveries within the caps and starts an attempt at each.
   * `more`: some are probably still due (the claim was full, or an endpoint or account is at its cap).
   */
  private async claimAndStart(free: number): Promise<{ taken: number; more: boolean }> {
    const w = this.config.webhooks;
    const lease = 2 * w.timeoutMs + 5000;
    const busy = [...this.inFlight];
    const accounts = [...this.inFlightByAccount];
    const claimed = await queryPrepared<Claimed>(this.db, CLAIM, [
      free,
      lease,
      busy.map(([id]) => id),
      busy.map(([, n]) => n),
      w.circuitFailures,
      w.endpointConcurrency,
      accounts.map(([id]) => id),
      accounts.map(([, n]) => n),
      accountShare(w),
    ]);
    // The endpoint was deleted (its row alone goes; its deliveries are swept later): nobody to
    // send these to, and after a delete there may be thousands, so they go in one statement.
    this.lastTaken = claimed.length;
    const orphaned = claimed.filter((c) => !c.found).map((c) => c.id);
    if (orphaned.length > 0) await this.db.query(`DELETE FROM webhook_deliveries WHERE id = ANY($1::uuid[])`, [orphaned]);
    // A claim's deliveries mostly go to a few endpoints: each endpoint's secrets are decrypted once.
    const secrets = new Map<string, string[]>();
    for (const c of claimed) {
      if (!c.found) continue;
      count(this.inFlight, c.endpoint_id, 1);
      count(this.inFlightByAccount, c.account_id, 1);
      this.inFlightTotal++;
      const attempt = this.attempt(c, secrets).finally(() => {
        count(this.inFlight, c.endpoint_id, -1);
        count(this.inFlightByAccount, c.account_id, -1);
        this.inFlightTotal--;
        this.attempts.delete(attempt);
        this.wake?.();
      });
      this.attempts.add(attempt);
    }
    return { taken: claimed.length, more: claimed.length >= free || this.anyAtCap() };
  }

  /** One attempt (its endpoint exists), recorded when it ends: a success with the others ending meanwhile. */
  private async attempt(c: Claimed, secrets: Map<string, string[]>): Promise<void> {
    try {
      if (c.disabled_at) {
        await this.db.query(`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = $3 WHERE ${FENCE}`, [
          c.id,
          c.attempts,
          'The endpoint is disabled',
        ]);
        return;
      }
      let signing = secrets.get(c.endpoint_id);
      if (!signing) {
        signing = [this.box.open(c.secret_enc, c.endpoint_id)];
        if (c.previous_secret_enc && c.previous_signs) signing.push(this.box.open(c.previous_secret_enc, c.endpoint_id));
        secrets.set(c.endpoint_id, signing);
      }
      const outcome = await this.send(c, signing);
      this.metrics?.webhookAttempts.inc({
        result: outcome.delivered ? 'delivered' : outcome.statusCode === null ? 'network_error' : 'http_error',
      });
      if (outcome.delivered) await this.recordSuccess(c, outcome.statusCode);
      else await this.recordFailure(c, outcome);
    } catch (err) {
      // The lease runs out and a later claim retries it.
      this.logger.warn(`Webhook delivery ${c.id} attempt ${c.attempts}: ${(err as Error).message}`);
    }
  }

  /**
   * Successes, the common case, are written at once when no write of them is in flight, else
   * together with the others that ended meanwhile: one statement per group, never per round.
   */
  private recordSuccess(c: Claimed, statusCode: number): Promise<void> {
    this.successes.push({ c, statusCode });
    return this.flushSuccesses();
  }

  private flushSuccesses(): Promise<void> {
    this.writing ??= (async () => {
      try {
        while (this.successes.length > 0) {
          const group = this.successes;
          this.successes = [];
          await queryPrepared(this.db, DELIVERED_GROUP, [
            group.map((d) => d.c.id),
            group.map((d) => d.c.attempts),
            group.map((d) => d.statusCode),
          ]).catch((err) =>
            this.logger.warn(
              `Could not record ${group.length} webhook deliveries (they are sent again once leased out): ${(err as Error).message}`,
            ),
          );
        }
      } finally {
        this.writing = null;
      }
    })();
    return this.writing;
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
    const w = this.config.webhooks;
    const delay = c.attempts <= w.retryDelaysMs.length ? w.retryDelaysMs[c.attempts - 1] : null;
    const probe = c.probe === true;
    const [endpoint] = await queryPrepared<{ failures: number; openUntil: Date | null; opened: boolean }>(this.db, FAILED, [
      c.id,
      c.attempts,
      outcome.statusCode,
      outcome.error.slice(0, 500),
      delay,
      w.circuitFailures,
      w.circuitCooldownMs,
      circuitCooldownMs((c.failures ?? 0) + 1, w.circuitFailures, w.circuitCooldownMs),
      probe,
    ]);
    if (!endpoint) return;
    if (endpoint.opened) {
      this.metrics?.webhookCircuitsOpened.inc();
      this.logger.warn(
        `Webhook endpoint ${c.endpoint_id}: ${endpoint.failures} failed attempts in a row (last: ${outcome.error}); circuit open until ${endpoint.openUntil?.toISOString()}`,
      );
    }
    if (probe) await this.expireHeld(c.endpoint_id);
  }

  /**
   * While its circuit is open an endpoint's deliveries are held, not attempted. Those held
   * longer than the whole retry schedule fail as they would have by then (each probe that
   * fails checks), so a dead endpoint's log ends like it would without the circuit.
   */
  private async expireHeld(endpointId: string): Promise<void> {
    const scheduleMs = this.config.webhooks.retryDelaysMs.reduce((sum, ms) => sum + ms, 0);
    await this.db.query(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL,
              last_error = COALESCE(last_error || '; ', '') || 'not attempted within the retry schedule: the endpoint kept failing (circuit open)'
        WHERE endpoint_id = $1 AND status = 'pending' AND next_attempt_at <= now() AND created_at < now() - $2 * interval '1 millisecond'`,
      [endpointId, scheduleMs],
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
      await this.db.query(`UPDATE webhook_endpoints SET secret_enc = $2, previous_secret_enc = $3 WHERE id = $1 AND secret_enc = $4`, [
        r.id,
        secret,
        previous,
        r.secret_enc,
      ]);
      resealed++;
    }
    if (resealed > 0) this.logger.log(`Re-encrypted ${resealed} webhook secret(s) under the current WEBHOOK_SECRET_KEY`);
  }
}
