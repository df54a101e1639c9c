import { Injectable, Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { abortReason } from '@app/errors';
import { KilnMetrics } from '@app/metrics';
import { isProviderError, UpstreamRateHeaders } from '@app/providers';
import { RedisScript, RedisService, withinRedisDeadline } from '@app/redis';
import { ModelConcurrencyLimiter } from './model-concurrency.limiter';

/**
 * Route pacing, shared by every generator through one Redis hash per model (`route-pace`):
 *
 * - `window`: how many calls may be in flight (AIMD). It starts at the route's
 *   maxConcurrency. A 429 Kiln caused cuts it to what was in flight when it came back (a
 *   measurement, so a storm of 429s from one burst converges on what the upstream took) and,
 *   once per round (the first 429 of a request sent after the last cut), to BETA of that.
 *   Every clean answer adds 1/window, i.e. one more call per round of clean answers, up to
 *   maxConcurrency again.
 * - `pause`: Retry-After holds every generator's next call until then.
 * - `budget`/`budgetUntil`: an answer's x-ratelimit-remaining-requests, less the calls started
 *   since that request started (they were not counted in it), spendable until its
 *   x-ratelimit-reset-requests (counted from when the call started, so early by the time it
 *   took to reach the upstream: of the answers placing one boundary the latest estimate is
 *   kept). At zero, calls wait for the reset; after the reset the window's
 *   x-ratelimit-limit-requests is spendable until the next answer tells more. The window's
 *   length (`span`) is the longest reset seen: a route's first answer from late in a window
 *   understates it, and a window rolled on by it can begin before the upstream's until a
 *   longer reset comes back (a few 429s at a route's start, asked again within the call).
 * - `tokens`: a bucket of the route's `ratePerMinute` (one second's worth of burst).
 *
 * Time is Redis's (TIME), as the concurrency limiter's. $1.. below is ARGV.
 */
const PACE_KEY_TTL_MS = 10 * 60_000;
/** Multiplicative decrease: the window after a round's first self-caused 429. */
export const PACING_BETA = 0.9;
/**
 * Rounds of clean answers the window spends one below the level of the last self-caused 429
 * before it asks for that level again: at a steady limit the probe, and its 429, come less
 * often, and the window spends that time at the most the upstream took (bench/findings.md).
 */
export const PLATEAU_ROUNDS = 3;
/** Added to an upstream's reset: it counted the call a little after Kiln started it. */
const RESET_MARGIN_MS = 50;
/** The window of a route nothing is known of yet (slow start: it doubles each clean round). */
export const INITIAL_WINDOW = 8;

/**
 * ARGV: maxConcurrency, ratePerMinute (0: none). Returns {waitMs, startSeq, startedAt, window,
 * quiet}: quiet (1) when nothing holds the route back — no pause, no header budget, no rate,
 * the window at maxConcurrency — so a clean answer without headers would change nothing.
 */
const ADMIT = new RedisScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max, rpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local h = redis.call('HMGET', KEYS[1], 'pause', 'budget', 'budgetUntil', 'limit', 'tokens', 'tokensAt', 'window', 'span')
local window = h[7] or tostring(math.min(max, ${INITIAL_WINDOW}))
local pause = tonumber(h[1]) or 0
if pause > now then return {pause - now, 0, now, window} end
local budget, budgetUntil, limit = tonumber(h[2]), tonumber(h[3]) or 0, tonumber(h[4])
local span = tonumber(h[8])
if budget and budgetUntil <= now then
  -- The upstream's window reset: the next one holds its full limit until its own reset
  -- (windows of the longest reset seen), until an answer says otherwise.
  if limit and span and span > 0 then
    budgetUntil = budgetUntil + (math.floor((now - budgetUntil) / span) + 1) * span
    budget = limit
  else
    budget = nil
  end
end
if budget and budget <= 0 then return {math.max(1, budgetUntil - now), 0, now, window} end
local tokens = nil
if rpm > 0 then
  local burst = math.max(1, math.ceil(rpm / 60))
  local at = tonumber(h[6]) or now
  tokens = math.min(burst, (tonumber(h[5]) or burst) + (now - at) * rpm / 60000)
  if tokens < 1 then return {math.ceil((1 - tokens) * 60000 / rpm), 0, now, window} end
  tokens = tokens - 1
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'tokensAt', now)
end
if budget then
  redis.call('HSET', KEYS[1], 'budget', budget - 1, 'budgetUntil', budgetUntil)
else
  redis.call('HDEL', KEYS[1], 'budget')
end
local seq = redis.call('HINCRBY', KEYS[1], 'starts', 1)
redis.call('PEXPIRE', KEYS[1], ${PACE_KEY_TTL_MS})
local quiet = 0
if not budget and rpm <= 0 and tonumber(window) >= max then quiet = 1 end
return {0, seq, now, window, quiet}`);

/**
 * KEYS[1] the pace hash, KEYS[2] the model's slot leases (the concurrency limiter's: the
 * calls in flight across generators, this one's lease still among them).
 * ARGV: outcome ('ok' | 'refused' | 'other'), maxConcurrency, startSeq, startedAt,
 * remaining, limit, resetMs, retryAfterMs (-1: not sent). Returns the window (string).
 */
const ANSWERED = new RedisScript(`
local function growth(window, threshold, ceiling)
  if window < threshold then return math.min(1, threshold - window) end
  if ceiling and window >= ceiling - 1 and window < ceiling then return 1 / (${PLATEAU_ROUNDS} * window) end
  return 1 / window
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local outcome, max, seq, startedAt = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local remaining, limit, resetMs, retryAfter = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local inFlight = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') - 1
local h = redis.call('HMGET', KEYS[1], 'window', 'cutAt', 'starts', 'pause', 'threshold', 'budgetUntil', 'span', 'budget', 'ceiling')
local window = math.min(max, tonumber(h[1]) or math.min(max, ${INITIAL_WINDOW}))
local cutAt, starts, threshold = tonumber(h[2]) or 0, tonumber(h[3]) or seq, tonumber(h[5]) or max
if outcome == 'refused' then
  window = math.max(1, math.min(window, inFlight))
  if startedAt >= cutAt then
    redis.call('HSET', KEYS[1], 'cutAt', now, 'ceiling', tostring(math.floor(window) + 1))
    window = math.max(1, window * ${PACING_BETA})
  end
  threshold = window
  redis.call('HSET', KEYS[1], 'threshold', tostring(threshold))
elseif outcome == 'ok' then
  -- Below the threshold (no 429 yet, or grown back to the last cut), one more per clean
  -- answer: the window doubles each round. Above, one more per round; one below the level
  -- last refused (ceiling), one more per ${PLATEAU_ROUNDS} rounds.
  local ceiling = tonumber(h[9])
  window = math.min(max, window + growth(window, threshold, ceiling))
end
redis.call('HSET', KEYS[1], 'window', tostring(window))
if retryAfter >= 0 then
  local pause = math.max(tonumber(h[4]) or 0, now + retryAfter)
  redis.call('HSET', KEYS[1], 'pause', pause)
end
if limit >= 0 then redis.call('HSET', KEYS[1], 'limit', limit) end
local span = math.max(tonumber(h[7]) or 0, resetMs)
if resetMs >= 0 then redis.call('HSET', KEYS[1], 'span', span) end
if remaining >= 0 and resetMs >= 0 then
  -- The upstream counted this call when it arrived, a little after it started here, and its
  -- reset counts from then: the margin keeps Kiln's idea of the reset from falling early.
  local untilMs = startedAt + resetMs + ${RESET_MARGIN_MS}
  local current = tonumber(h[6])
  -- How many windows before the route's current one the answer's boundary falls (0: the same).
  local behind = 0
  if current and span > 0 then behind = math.floor((current - untilMs) / span + 0.5) end
  if untilMs > now and behind <= 0 then
    -- Each answer's estimate is early by however much more than the margin its request took
    -- to reach the upstream (a loaded generator, a slow network), never late: of the answers
    -- placing the same boundary keep the latest. Taking the newest answer's instead let one
    -- slow request pull the reset early, and the window's full limit was then sent before the
    -- upstream had reset.
    -- (Only the same boundary: one ADMIT rolled on by a span still shorter than the window is
    -- not a whole number of windows from the next.)
    local sameWindow = current and span > 0 and math.abs(untilMs - current) < span / 2
    -- Calls started after this one (all in the same window) are not counted in its remaining.
    local budget = remaining - math.max(0, starts - seq)
    local untilAt = untilMs
    if sameWindow then
      untilAt = math.max(untilMs, current)
      -- Nor are calls started before it that reached the upstream after it (a request delayed
      -- on its way): within one window an answer only lowers the budget, which already counts
      -- every call started in it; the first answer of a later window sets it.
      local currentBudget = tonumber(h[8])
      if currentBudget then budget = math.min(budget, currentBudget) end
    end
    redis.call('HSET', KEYS[1], 'budget', budget, 'budgetUntil', untilAt)
  elseif not current then
    -- An answer slower than the reset tells only where windows fall: ADMIT rolls it forward.
    redis.call('HSET', KEYS[1], 'budget', 0, 'budgetUntil', untilMs)
  elseif span > 0 then
    -- An earlier window's boundary (an answer slower than the reset, or one that came back
    -- just before the boundary it places after ADMIT had already rolled on, 'span' being the
    -- longest reset seen and so a little short): rolled to the current window it only moves
    -- the boundary later (estimates err early), never the budget. Taken as the current
    -- window's instead, it set a boundary ADMIT then rolled past at once, with a second full
    -- budget inside one upstream window (the 3-8 % of 429s of 2026-11-27, bench/findings.md).
    local rolled = untilMs + behind * span
    if rolled > current and rolled - current < span / 2 then redis.call('HSET', KEYS[1], 'budgetUntil', rolled) end
  end
end
redis.call('PEXPIRE', KEYS[1], ${PACE_KEY_TTL_MS})
return tostring(window)`);

/** A refused call waits this long before asking again, doubling with each refusal of the call. */
const REFUSAL_BACKOFF_MS = 100;
const REFUSAL_BACKOFF_MAX_MS = 1000;
/** Each Redis call of the pacer gives up after this; the local fallback takes over. */
const REDIS_TIMEOUT_MS = 1000;
/**
 * How long a generator admits a quiet route's calls without asking Redis (ADMIT's `quiet`):
 * such a route's clean answers without headers change nothing there, and asking twice per
 * call was a third of a fast pipeline's Redis commands (bench/findings.md). A 429, a header
 * or another generator's cut is seen within this long; the first of them ends it at once.
 */
export const QUIET_RECHECK_MS = 200;
/** A wait is re-asked at least this often, so a cut, a reset or a pause lifted elsewhere is seen. */
const MAX_WAIT_MS = 2000;
/** After Redis failed, the local fallback is used this long before Redis is tried again. */
const FALLBACK_MS = 5000;

export interface PaceRoute {
  model: string;
  /**
   * Where the calls go (routeLabel: type, address, upstream model; never a key): what is
   * learned of one upstream is not applied to the next one an operator routes the model to.
   */
  upstream: string;
  maxConcurrency: number;
  ratePerMinute?: number;
}

export interface PacedCallOptions {
  /** Order in the model's local line (ModelConcurrencyLimiter). */
  priority?: number;
  /** Aborting rejects the wait (for a slot or the pacing) with the signal's reason. */
  signal?: AbortSignal;
  /** Runs once, within the first slot, before the first call (the generator's fenced send). */
  beforeFirstCall?: () => Promise<void>;
  /** A self-caused 429 that is asked again within the same call (not counted as an attempt). */
  onRefusal?: (err: unknown) => void;
}

/**
 * Self-caused 429s asked again within one paced call before the call fails with the last: the
 * pacing has shrunk the window by then, so more means the key's limit is not the reason (or
 * it is zero), and the task's attempts take over.
 */
export const FREE_RATE_LIMIT_RETRIES = 5;

/** A 429 Kiln caused by going too fast: a `rate_limited` answer (not, e.g., OpenAI's insufficient_quota). */
export function isSelfCausedRateLimit(err: unknown): boolean {
  return isProviderError(err) && err.kind === 'rate_limited';
}

/**
 * Moves a ticket's start to when its call is made: by then this generator may have waited
 * since it asked for the admission (the answer's way back, a stall of a loaded process, the
 * first call's fenced send). The upstream counts the call and its reset from its arrival, so a
 * start left at the admission places the reset early by that wait; past RESET_MARGIN_MS the
 * window's next budget was spent before the upstream had reset (7 of 41 calls refused in a
 * loaded CI run). Counted from the ask, the start errs late, never early: the reset is waited
 * for a little longer, never sent into.
 */
export function sent(ticket: PaceTicket, now = Date.now()): void {
  ticket.startedAt += Math.max(0, now - ticket.askedAt);
  ticket.askedAt = now;
}

/** What the pacer needs back from a call it admitted. */
export interface PaceTicket {
  route: PaceRoute;
  startSeq: number;
  /**
   * When the call left for the upstream, in the pacer's clock (Redis's TIME at admission, or
   * this generator's own in the fallback), moved on by `sent` to when the call was made.
   */
  startedAt: number;
  /** This generator's clock when it asked for the admission (see `sent`). */
  askedAt: number;
  /** Admitted by the local fallback (Redis did not answer). */
  local: boolean;
  /** The route was quiet (QUIET_RECHECK_MS): a clean answer without headers is not told to Redis. */
  quiet?: boolean;
}

export type PaceOutcome =
  /** A clean answer: the window grows. */
  | { kind: 'ok'; rateHeaders?: UpstreamRateHeaders }
  /** A 429 Kiln caused by going too fast: the window shrinks, Retry-After pauses the route. */
  | { kind: 'refused'; rateHeaders?: UpstreamRateHeaders; retryAfterMs?: number }
  /** Anything else (a failure that says nothing about the rate): headers only. */
  | { kind: 'other'; rateHeaders?: UpstreamRateHeaders };

/** The same rules as the scripts, kept by one generator while Redis does not answer. */
interface LocalPace {
  window: number;
  threshold: number;
  /** The level of the last round's first self-caused 429 (see PLATEAU_ROUNDS). */
  ceiling?: number;
  cutAt: number;
  pause: number;
  tokens: number;
  tokensAt: number;
}

/**
 * Paces each upstream route's calls across all generators (see the scripts above): the
 * concurrency limiter reads `windowOf` as the route's cap, and every call waits in `admit`
 * (inside its slot) for the pause, the header budget and the route's rate, then reports its
 * answer to `answered`. Every Redis call has a timeout; while Redis does not answer, each
 * generator keeps the same rules locally (per generator, so N generators may together go N
 * times the rate until Redis is back) rather than stopping.
 */
@Injectable()
export class RoutePacer {
  private readonly logger = new Logger(RoutePacer.name);
  /** The last window Redis told, per pace key: what the limiter caps the model's line at until the hash holds one. */
  private readonly windows = new Map<string, number>();
  private readonly locals = new Map<string, LocalPace>();
  /** This generator's calls in flight, by model. */
  private readonly inFlight = new Map<string, number>();
  private fallbackUntil = 0;
  /** Pace keys by model and upstream: the key hashes the route label, once per route, not per call. */
  private readonly paceKeys = new Map<string, string>();
  /** Until when each quiet route (by pace key) is admitted locally. */
  private readonly quietUntil = new Map<string, number>();

  constructor(
    private readonly redis: RedisService,
    private readonly limiter: ModelConcurrencyLimiter,
    private readonly metrics: KilnMetrics,
  ) {}

  paceKey(route: Pick<PaceRoute, 'model' | 'upstream'>): string {
    const id = `${route.model}\n${route.upstream}`;
    let key = this.paceKeys.get(id);
    if (key === undefined) {
      key = this.redis.key('route-pace', route.model, createHash('sha256').update(route.upstream).digest('hex').slice(0, 16));
      // Routes are few; a map that grew past this (operators re-routing for months) starts again.
      if (this.paceKeys.size >= 10_000) this.paceKeys.clear();
      this.paceKeys.set(id, key);
    }
    return key;
  }

  /**
   * One upstream call within the model's slot and the route's pacing: the slot's cap is the
   * route's window, the call waits for the pause, header budget and rate, and its answer feeds
   * the pacing. A self-caused 429 is asked again (a new slot, the pacing's wait) up to
   * FREE_RATE_LIMIT_RETRIES times; any other failure, or the last 429, is the caller's.
   */
  async run<T extends object>(route: PaceRoute, opts: PacedCallOptions, call: () => Promise<T>): Promise<T> {
    const { model } = route;
    let first = true;
    for (let refusals = 0; ; refusals++) {
      const waitStarted = Date.now();
      const lease = await this.limiter.acquire(model, {
        priority: opts.priority,
        signal: opts.signal,
        cap: this.windowOf(route),
        pacing: { key: this.paceKey(route), ceiling: route.maxConcurrency },
      });
      try {
        const ticket = await this.admit(route, opts.signal);
        this.metrics.upstreamSlotWait.inc({ model }, (Date.now() - waitStarted) / 1000);
        if (first) {
          first = false;
          await opts.beforeFirstCall?.();
        }
        const inFlight = (this.inFlight.get(model) ?? 0) + 1;
        this.setInFlight(model, inFlight);
        sent(ticket);
        try {
          const result = await call();
          await this.answered(ticket, { kind: 'ok', rateHeaders: (result as { rateHeaders?: UpstreamRateHeaders }).rateHeaders }, inFlight);
          return result;
        } catch (err) {
          const refused = isSelfCausedRateLimit(err);
          const rateHeaders = isProviderError(err) ? err.rateHeaders : undefined;
          const retryAfterMs = isProviderError(err) ? err.retryAfterMs : undefined;
          await this.answered(ticket, refused ? { kind: 'refused', rateHeaders, retryAfterMs } : { kind: 'other', rateHeaders }, inFlight);
          if (!refused || refusals >= FREE_RATE_LIMIT_RETRIES || opts.signal?.aborted) throw err;
          opts.onRefusal?.(err);
        } finally {
          this.setInFlight(model, (this.inFlight.get(model) ?? 1) - 1);
        }
      } finally {
        lease.release();
      }
      // Not straight back into the line: the calls refused with this one would all come back
      // at once, before the shrunk window holds them (Retry-After, when sent, adds its pause).
      await sleep(Math.min(REFUSAL_BACKOFF_MAX_MS, REFUSAL_BACKOFF_MS * 2 ** refusals) * (0.5 + Math.random()), opts.signal);
    }
  }

  private setInFlight(model: string, count: number): void {
    if (count <= 0) this.inFlight.delete(model);
    else this.inFlight.set(model, count);
    this.metrics.upstreamInFlight.set({ model }, Math.max(0, count));
  }

  /**
   * The route's current concurrency window as this generator last saw it (the limiter's cap
   * until the pace hash holds one), at most its maxConcurrency. By route, not by model: a model
   * routed to another upstream starts afresh rather than at the old upstream's window.
   */
  windowOf(route: Pick<PaceRoute, 'model' | 'upstream' | 'maxConcurrency'>): number {
    const window = this.windows.get(this.paceKey(route)) ?? INITIAL_WINDOW;
    const cap = Math.min(route.maxConcurrency, Math.max(1, Math.floor(window)));
    this.metrics.upstreamLimit.set({ model: route.model }, cap);
    return cap;
  }

  /** Waits until the route may be called; rejects with the signal's reason when aborted. */
  async admit(route: PaceRoute, signal?: AbortSignal): Promise<PaceTicket> {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const { waitMs, ticket } = await this.tryAdmit(route);
      if (ticket) return ticket;
      await sleep(Math.min(MAX_WAIT_MS, waitMs) * (0.9 + Math.random() * 0.2), signal);
    }
  }

  /**
   * Tells the pacer how an admitted call was answered, before its slot is released (never
   * throws). `localInFlight`: this generator's calls in flight, for the local fallback.
   */
  async answered(ticket: PaceTicket, outcome: PaceOutcome, localInFlight: number): Promise<void> {
    const { route } = ticket;
    if (ticket.quiet) {
      // A clean answer without headers on a quiet route changes nothing in Redis.
      if (outcome.kind === 'ok' && !hasRateHeaders(outcome.rateHeaders)) return;
      // Anything else ends the quiet at once and is told to Redis (below).
      this.quietUntil.delete(this.paceKey(route));
    }
    if (!ticket.local && Date.now() >= this.fallbackUntil) {
      const h = outcome.rateHeaders ?? {};
      const retryAfter = outcome.kind === 'refused' && outcome.retryAfterMs !== undefined ? outcome.retryAfterMs : -1;
      try {
        const window = await this.bounded(
          ANSWERED.run(
            this.redis.client,
            [this.paceKey(route), this.limiter.slotsKey(route.model)],
            // A ticket admitted quietly has no start number (0): as if it started last (no later
            // call counted against the answer's remaining), which errs by at most the calls in flight.
            [
              outcome.kind,
              route.maxConcurrency,
              ticket.startSeq > 0 ? ticket.startSeq : Number.MAX_SAFE_INTEGER,
              ticket.startedAt,
              h.remaining ?? -1,
              h.limit ?? -1,
              h.resetMs ?? -1,
              retryAfter,
            ],
          ),
        );
        this.windowMoved(route, Number(window));
        return;
      } catch (err) {
        this.fallBack(err);
      }
    }
    this.answeredLocally(ticket, outcome, Math.max(1, localInFlight - 1));
  }

  private async tryAdmit(route: PaceRoute): Promise<{ waitMs: number; ticket?: PaceTicket }> {
    const key = this.paceKey(route);
    const now = Date.now();
    const quietUntil = this.quietUntil.get(key);
    if (quietUntil !== undefined) {
      if (now < quietUntil) return { waitMs: 0, ticket: { route, startSeq: 0, startedAt: now, askedAt: now, local: false, quiet: true } };
      // One call asks Redis again; the others stay quiet until its answer says otherwise.
      this.quietUntil.set(key, now + QUIET_RECHECK_MS);
    }
    if (now >= this.fallbackUntil) {
      try {
        const [waitMs, seq, startedAt, window, quiet] = (await this.bounded(
          ADMIT.run(this.redis.client, [key], [route.maxConcurrency, route.ratePerMinute ?? 0]),
        )) as (number | string)[];
        this.windowMoved(route, Number(window));
        if (Number(waitMs) > 0) return { waitMs: Number(waitMs) };
        const isQuiet = Number(quiet) === 1;
        if (isQuiet) {
          // Routes are few; a map that grew past this (re-routed for months) starts again.
          if (this.quietUntil.size >= 10_000) this.quietUntil.clear();
          this.quietUntil.set(key, Date.now() + QUIET_RECHECK_MS);
        } else {
          this.quietUntil.delete(key);
        }
        return {
          waitMs: 0,
          ticket: {
            route,
            startSeq: Number(seq),
            startedAt: Number(startedAt),
            askedAt: now,
            local: false,
            ...(isQuiet ? { quiet: true } : {}),
          },
        };
      } catch (err) {
        this.fallBack(err);
      }
    }
    return this.admitLocally(route);
  }

  private bounded<T>(call: Promise<T>): Promise<T> {
    return withinRedisDeadline(call, REDIS_TIMEOUT_MS);
  }

  private fallBack(err: unknown): void {
    if (Date.now() >= this.fallbackUntil) {
      this.logger.warn(`Route pacing falls back to this generator's own limits for ${FALLBACK_MS} ms: ${(err as Error)?.message ?? err}`);
    }
    this.fallbackUntil = Date.now() + FALLBACK_MS;
    this.metrics.upstreamPacingFallback.inc();
  }

  private local(route: PaceRoute): LocalPace {
    const key = this.paceKey(route);
    let pace = this.locals.get(key);
    if (!pace) {
      const window = this.windows.get(key) ?? Math.min(route.maxConcurrency, INITIAL_WINDOW);
      pace = {
        window,
        threshold: route.maxConcurrency,
        cutAt: 0,
        pause: 0,
        tokens: Math.max(1, Math.ceil((route.ratePerMinute ?? 0) / 60)),
        tokensAt: Date.now(),
      };
      if (this.locals.size >= 10_000) this.locals.clear();
      this.locals.set(key, pace);
    }
    return pace;
  }

  private admitLocally(route: PaceRoute): { waitMs: number; ticket?: PaceTicket } {
    const pace = this.local(route);
    const now = Date.now();
    if (pace.pause > now) return { waitMs: pace.pause - now };
    const rpm = route.ratePerMinute ?? 0;
    if (rpm > 0) {
      const burst = Math.max(1, Math.ceil(rpm / 60));
      pace.tokens = Math.min(burst, pace.tokens + ((now - pace.tokensAt) * rpm) / 60_000);
      pace.tokensAt = now;
      if (pace.tokens < 1) return { waitMs: Math.ceil(((1 - pace.tokens) * 60_000) / rpm) };
      pace.tokens -= 1;
    }
    return { waitMs: 0, ticket: { route, startSeq: 0, startedAt: now, askedAt: now, local: true } };
  }

  private answeredLocally(ticket: PaceTicket, outcome: PaceOutcome, inFlight: number): void {
    const pace = this.local(ticket.route);
    const max = ticket.route.maxConcurrency;
    pace.window = Math.min(max, pace.window);
    if (outcome.kind === 'refused') {
      pace.window = Math.max(1, Math.min(pace.window, inFlight));
      if (ticket.startedAt >= pace.cutAt) {
        pace.ceiling = Math.floor(pace.window) + 1;
        pace.window = Math.max(1, pace.window * PACING_BETA);
        pace.cutAt = Date.now();
      }
      pace.threshold = pace.window;
      if (outcome.retryAfterMs !== undefined) pace.pause = Math.max(pace.pause, Date.now() + outcome.retryAfterMs);
    } else if (outcome.kind === 'ok') {
      pace.window = Math.min(max, pace.window + windowGrowth(pace.window, pace.threshold, pace.ceiling));
    }
    this.windowMoved(ticket.route, pace.window);
  }

  /** The limiter's line and the gauge follow the window as answers move it. */
  private windowMoved(route: PaceRoute, window: number): void {
    const key = this.paceKey(route);
    if (!this.windows.has(key) && this.windows.size >= 10_000) this.windows.clear();
    this.windows.set(key, window);
    this.limiter.setCap(route.model, this.windowOf(route));
  }
}

/** ANSWERED's `growth`: what a clean answer adds to the window (slow start, plateau, one per round). */
function windowGrowth(window: number, threshold: number, ceiling: number | undefined): number {
  if (window < threshold) return Math.min(1, threshold - window);
  if (ceiling !== undefined && window >= ceiling - 1 && window < ceiling) return 1 / (PLATEAU_ROUNDS * window);
  return 1 / window;
}

function hasRateHeaders(h: UpstreamRateHeaders | undefined): boolean {
  return h !== undefined && (h.remaining !== undefined || h.limit !== undefined || h.resetMs !== undefined);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(1, ms),
    );
    function onAbort(): void {
      clearTimeout(timer);
      reject(abortReason(signal!));
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
