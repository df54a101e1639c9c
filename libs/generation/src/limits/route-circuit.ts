import { Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RouteHealthStore } from '@app/catalog';
import { KilnMetrics } from '@app/metrics';
import type { FailoverSettings, ProviderRoute } from '@app/providers';
import { RedisScript, withinRedisDeadline } from '@app/redis';

/**
 * A circuit per route of a model's chain, shared by every generator through one Redis hash
 * per route (`route-circuit`, RouteHealthStore.circuitKey, which the admin API reads):
 *
 * - closed: tasks go. Each failure of a failover kind adds one to `failures`; a success sets
 *   it back to 0. `failuresToOpen` in a row open it.
 * - open: no task goes until `openUntil` (now + cooldownMs when it opened).
 * - half_open: past the cooldown, the first task asking is the probe (it holds `probeUntil`,
 *   a lease, so a probe lost with its generator does not keep the route shut); every other
 *   task keeps away. The probe's success closes the circuit, its failure opens it again.
 *
 * Time is Redis's (TIME), as the pacer's. $1.. below is ARGV.
 *
 * An opening is also announced (PUBLISH on KEYS[2] of RECORD): every generator learns at once
 * that the route is dead, not at its own next admission or answer, so a task of another
 * generator admitted just before the opening and handed its slot after it is not sent there.
 */

/** How long a probe may take before another task may probe instead (its generator died, most likely). */
const PROBE_LEASE_MIN_MS = 30_000;
/** A circuit's hash outlives its last change by this much, then a quiet route starts closed again. */
const CIRCUIT_TTL_MS = 24 * 3600_000;

/**
 * ARGV: probeLeaseMs. Returns {verdict, waitMs, state}: verdict 0 go, 1 go as the probe, 2 keep
 * away for waitMs; state 0 closed, 1 half-open, 2 open.
 */
const ADMIT = new RedisScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'state', 'openUntil', 'probeUntil')
local state = h[1]
if state == 'open' then
  local openUntil = tonumber(h[2]) or 0
  if openUntil > now then return {2, openUntil - now, 2} end
  redis.call('HSET', KEYS[1], 'state', 'half_open', 'probeUntil', now + tonumber(ARGV[1]))
  redis.call('PEXPIRE', KEYS[1], ${CIRCUIT_TTL_MS})
  return {1, 0, 1}
end
if state == 'half_open' then
  local probeUntil = tonumber(h[3]) or 0
  if probeUntil > now then return {2, probeUntil - now, 1} end
  redis.call('HSET', KEYS[1], 'probeUntil', now + tonumber(ARGV[1]))
  return {1, 0, 1}
end
return {0, 0, 0}`);

/**
 * KEYS: the circuit's hash, the openings' channel. ARGV: outcome ('ok' | 'failure'),
 * failuresToOpen, cooldownMs, probe (1: the answer is the probe's). Returns the state after it:
 * 0 closed, 1 half-open, 2 open; an opening is published as `<hash key> <cooldownMs>`.
 * A failure of a call sent before the circuit opened (or while another task probes) changes
 * nothing: only the probe's answer decides a half-open circuit.
 */
const RECORD = new RedisScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local outcome, toOpen, cooldown, probe = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local state = redis.call('HGET', KEYS[1], 'state')
if outcome == 'ok' then
  if state == 'open' or (state == 'half_open' and not probe) then
    if state == 'open' then return 2 end
    return 1
  end
  redis.call('DEL', KEYS[1])
  return 0
end
if state == 'open' then return 2 end
if state == 'half_open' then
  if not probe then return 1 end
  redis.call('HSET', KEYS[1], 'state', 'open', 'openUntil', now + cooldown)
  redis.call('HDEL', KEYS[1], 'probeUntil')
  redis.call('PEXPIRE', KEYS[1], ${CIRCUIT_TTL_MS})
  redis.call('PUBLISH', KEYS[2], KEYS[1] .. ' ' .. cooldown)
  return 2
end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
redis.call('PEXPIRE', KEYS[1], ${CIRCUIT_TTL_MS})
if failures >= toOpen then
  redis.call('HSET', KEYS[1], 'state', 'open', 'openUntil', now + cooldown)
  redis.call('PUBLISH', KEYS[2], KEYS[1] .. ' ' .. cooldown)
  return 2
end
return 0`);

/** Each Redis call of the circuit gives up after this; the local circuit takes over. */
const REDIS_TIMEOUT_MS = 1000;
/** After Redis failed, the local circuit is used this long before Redis is tried again. */
const FALLBACK_MS = 5000;

export type CircuitState = 'closed' | 'half_open' | 'open';
const STATE_VALUE: Record<CircuitState, number> = { closed: 0, half_open: 1, open: 2 };
const STATES: CircuitState[] = ['closed', 'half_open', 'open'];

/** A route of a model's chain, as the circuit knows it. */
export interface CircuitRoute {
  model: string;
  index: number;
  route: ProviderRoute;
}

/** An admission: go (as the probe or not), or keep away for waitMs. */
export type CircuitVerdict = { go: true; probe: boolean } | { go: false; waitMs: number };

interface LocalCircuit {
  state: CircuitState;
  failures: number;
  openUntil: number;
  probeUntil: number;
}

/** The `route` label of a route's metrics: its place in the chain and its type. */
export function routeMetricsLabel(index: number, route: ProviderRoute): string {
  return `${index}/${route.type}`;
}

@Injectable()
export class RouteCircuit implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('RouteCircuit');
  /** Hears the openings other generators announce (null until listening). */
  private subscriber: Redis | null = null;
  private readonly locals = new Map<string, LocalCircuit>();
  private fallbackUntil = 0;
  /** Per route: until when this generator last saw it open (0: closed or half-open when last seen). */
  private readonly lastSeen = new Map<string, number>();

  constructor(
    private readonly health: RouteHealthStore,
    private readonly metrics: KilnMetrics,
  ) {}

  onModuleInit(): Promise<void> {
    return this.listen();
  }

  onModuleDestroy(): void {
    this.subscriber?.disconnect();
    this.subscriber = null;
  }

  /**
   * Subscribes to the openings' channel on a connection of its own, again each time it
   * reconnects (a SUBSCRIBE that failed is not resent by ioredis): an announced opening marks
   * the route seen open here until its cooldown ends. Best effort: without it (Redis down, the
   * announcement lost) a generator learns of the opening at its next admission or answer.
   * Resolves once first subscribed, or after the Redis deadline.
   */
  async listen(): Promise<void> {
    if (this.subscriber) return;
    const subscriber = this.client.duplicate();
    this.subscriber = subscriber;
    subscriber.on('error', () => undefined);
    subscriber.on('message', (_channel: string, message: string) => {
      const [key, cooldownMs] = message.split(' ');
      const until = Date.now() + Number(cooldownMs);
      if (key && Number.isFinite(until)) this.lastSeen.set(key, Math.max(this.lastSeen.get(key) ?? 0, until));
    });
    const warn = (err: unknown): void =>
      this.logger.warn(
        `Not subscribed to route circuit openings (${(err as Error)?.message ?? err}); until then a generator hears of one at its next admission or answer`,
      );
    const subscribed = new Promise<void>((resolve) => {
      subscriber.on('ready', () => {
        subscriber.subscribe(this.health.circuitOpenedChannel()).then(() => resolve(), warn);
      });
    });
    await this.bounded(subscribed).catch(warn);
  }

  /** Whether a task may go to the route now (as its probe, when half-open). */
  async admit(at: CircuitRoute, settings: FailoverSettings): Promise<CircuitVerdict> {
    const lease = Math.max(PROBE_LEASE_MIN_MS, settings.cooldownMs);
    if (Date.now() >= this.fallbackUntil) {
      try {
        const [verdict, waitMs, state] = (await this.bounded(ADMIT.run(this.client, [this.key(at)], [lease]))) as number[];
        this.show(at, STATES[state]);
        this.lastSeen.set(this.key(at), STATES[state] === 'open' ? Date.now() + Number(waitMs) : 0);
        return verdict === 2 ? { go: false, waitMs: Number(waitMs) } : { go: true, probe: verdict === 1 };
      } catch (err) {
        this.fallBack(err);
      }
    }
    return this.admitLocally(at, lease);
  }

  /**
   * Whether this generator last saw the route open, its cooldown not over: asked right before
   * an upstream call (no Redis), so a task admitted before the circuit opened and still waiting
   * for a slot does not go to a route now known dead.
   */
  seenOpen(at: CircuitRoute): boolean {
    const seen = this.lastSeen.get(this.key(at));
    return seen !== undefined && seen > Date.now();
  }

  /** An attempt's answer: ok, or a failure of a failover kind (anything else is not the route's fault: not recorded). */
  async record(at: CircuitRoute, settings: FailoverSettings, outcome: 'ok' | 'failure', probe: boolean): Promise<CircuitState> {
    if (Date.now() >= this.fallbackUntil) {
      try {
        const state = Number(
          await this.bounded(
            RECORD.run(
              this.client,
              [this.key(at), this.health.circuitOpenedChannel()],
              [outcome, settings.failuresToOpen, settings.cooldownMs, probe ? 1 : 0],
            ),
          ),
        );
        this.show(at, STATES[state]);
        if (STATES[state] === 'open')
          this.lastSeen.set(this.key(at), Math.max(this.lastSeen.get(this.key(at)) ?? 0, Date.now() + settings.cooldownMs));
        else this.lastSeen.set(this.key(at), 0);
        return STATES[state];
      } catch (err) {
        this.fallBack(err);
      }
    }
    return this.recordLocally(at, settings, outcome, probe);
  }

  private get client() {
    return this.health.redisClient;
  }

  private key(at: CircuitRoute): string {
    return this.health.circuitKey(at.model, at.route);
  }

  private show(at: CircuitRoute, state: CircuitState): void {
    this.metrics.routeCircuitState.set({ model: at.model, route: routeMetricsLabel(at.index, at.route) }, STATE_VALUE[state]);
  }

  /** The same rules as the scripts, kept by this generator alone while Redis does not answer. */
  private local(at: CircuitRoute): LocalCircuit {
    const key = this.key(at);
    let c = this.locals.get(key);
    if (!c) {
      c = { state: 'closed', failures: 0, openUntil: 0, probeUntil: 0 };
      this.locals.set(key, c);
    }
    return c;
  }

  private admitLocally(at: CircuitRoute, lease: number): CircuitVerdict {
    const c = this.local(at);
    const now = Date.now();
    if (c.state === 'open' && c.openUntil > now) return this.shown(at, c, { go: false, waitMs: c.openUntil - now });
    if (c.state === 'closed') return this.shown(at, c, { go: true, probe: false });
    if (c.state === 'half_open' && c.probeUntil > now) return this.shown(at, c, { go: false, waitMs: c.probeUntil - now });
    c.state = 'half_open';
    c.probeUntil = now + lease;
    return this.shown(at, c, { go: true, probe: true });
  }

  private recordLocally(at: CircuitRoute, settings: FailoverSettings, outcome: 'ok' | 'failure', probe: boolean): CircuitState {
    const c = this.local(at);
    const now = Date.now();
    if (outcome === 'ok') {
      if (c.state === 'closed' || (c.state === 'half_open' && probe)) Object.assign(c, { state: 'closed', failures: 0 });
    } else if (c.state === 'half_open' && probe) {
      Object.assign(c, { state: 'open', openUntil: now + settings.cooldownMs });
    } else if (c.state === 'closed' && ++c.failures >= settings.failuresToOpen) {
      Object.assign(c, { state: 'open', openUntil: now + settings.cooldownMs });
    }
    this.show(at, c.state);
    return c.state;
  }

  private shown(at: CircuitRoute, c: LocalCircuit, verdict: CircuitVerdict): CircuitVerdict {
    this.show(at, c.state);
    return verdict;
  }

  private bounded<T>(call: Promise<T>): Promise<T> {
    return withinRedisDeadline(call, REDIS_TIMEOUT_MS);
  }

  private fallBack(err: unknown): void {
    if (Date.now() >= this.fallbackUntil) {
      this.logger.warn(`Route circuits fall back to this generator's own for ${FALLBACK_MS} ms: ${(err as Error)?.message ?? err}`);
    }
    this.fallbackUntil = Date.now() + FALLBACK_MS;
    this.metrics.routeCircuitFallback.inc();
  }
}
