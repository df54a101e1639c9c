import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { ErrorCode, KilnError } from '@app/errors';
import { requiredKey, routeLabel, type ProviderRoute } from '@app/providers';
import { RedisService } from '@app/redis';

/** A generator that has not reported for this long is gone (it reports every ENV_REPORT_INTERVAL_MS). */
export const GENERATOR_REPORT_TTL_S = 60;
export const ENV_REPORT_INTERVAL_MS = 15_000;
/** Reading route health never holds an admin request longer than this. */
const READ_TIMEOUT_MS = 1500;

/** The last outcome a generator saw on a model's route (one that counts against it: see TaskTelemetry). */
export interface RouteOutcome {
  ok: boolean;
  /** The task's error (one safe line), when not ok. */
  error?: string;
  errorCode?: string;
  /** Upstream HTTP status, when there was one. */
  status?: number;
  at: string;
}

/** A model's route as the generators see it. */
export type RouteHealth =
  | { state: 'ok'; lastSuccessAt: string | null }
  | { state: 'not_configured'; missing: string[] }
  | { state: 'failing'; lastError: string; errorCode: string | null; status: number | null; lastErrorAt: string }
  | { state: 'unknown'; reason: string };

/**
 * Route health through Redis: each generator reports the names of the upstream keys it holds
 * (`*_API_KEY` names, never values) and the last outcome per model; the api reads them for
 * GET /v1/admin/models and to refuse a route no generator could use.
 */
@Injectable()
export class RouteHealthStore {
  constructor(private readonly redis: RedisService) {}

  private generatorsKey(): string {
    return this.redis.key('route-health', 'generators');
  }

  /**
   * Keyed by the route as well as the model (its label: type, upstream model, base URL), so a
   * model routed elsewhere starts with no history instead of showing the last route's.
   */
  private outcomeKey(model: string, route: ProviderRoute): string {
    return this.redis.key('route-health', 'route', model, routeId(route));
  }

  /** A generator's heartbeat: the key names it holds. Entries older than the TTL are ignored. */
  async reportEnv(instance: string, envNames: string[]): Promise<void> {
    await this.redis.client.hset(this.generatorsKey(), instance, JSON.stringify({ envNames: [...envNames].sort(), at: Date.now() }));
  }

  async forgetGenerator(instance: string): Promise<void> {
    await this.redis.client.hdel(this.generatorsKey(), instance);
  }

  async reportOutcome(model: string, route: ProviderRoute, outcome: RouteOutcome): Promise<void> {
    await this.redis.client.set(this.outcomeKey(model, route), JSON.stringify(outcome), 'EX', 7 * 24 * 3600);
  }

  /** The key names every live generator holds, one list per generator; empty when none reports. */
  async liveGenerators(): Promise<string[][]> {
    const entries = await this.bounded(this.redis.client.hgetall(this.generatorsKey()));
    const cutoff = Date.now() - GENERATOR_REPORT_TTL_S * 1000;
    return Object.values(entries)
      .map((v) => JSON.parse(v) as { envNames: string[]; at: number })
      .filter((g) => g.at >= cutoff)
      .map((g) => g.envNames);
  }

  /** The Redis client the circuits run their scripts on (libs/generation route-circuit.ts). */
  get redisClient() {
    return this.redis.client;
  }

  /** The Redis hash of a route's circuit, shared by every generator (libs/generation route-circuit.ts). */
  circuitKey(model: string, route: ProviderRoute): string {
    return this.redis.key('route-circuit', model, routeId(route));
  }

  /** The channel on which a circuit's opening is announced to every generator: `<circuit key> <cooldown ms>`. */
  circuitOpenedChannel(): string {
    return this.redis.key('route-circuit-opened');
  }

  /**
   * Each route of each model's chain with its health and circuit, by model key (GET
   * /v1/admin/models). A circuit with nothing recorded is closed.
   */
  async routesHealthOf(models: { key: string; routes: ProviderRoute[] }[]): Promise<Record<string, RouteState[]>> {
    const generators = await this.liveGenerators();
    const pairs = models.flatMap((m) => m.routes.map((route, index) => ({ model: m.key, route, index })));
    const outcomes = pairs.length ? await this.bounded(this.redis.client.mget(...pairs.map((p) => this.outcomeKey(p.model, p.route)))) : [];
    const circuits = await this.bounded(
      Promise.all(pairs.map((p) => this.redis.client.hmget(this.circuitKey(p.model, p.route), 'state', 'failures', 'openUntil'))),
    );
    const states: Record<string, RouteState[]> = Object.fromEntries(models.map((m) => [m.key, []]));
    pairs.forEach((p, i) => {
      const raw = outcomes[i];
      const [state, failures, openUntil] = circuits[i];
      states[p.model].push({
        index: p.index,
        type: p.route.type,
        health: routeHealth(p.route, generators, raw ? (JSON.parse(raw) as RouteOutcome) : null),
        circuit: {
          state: state === 'open' || state === 'half_open' ? state : 'closed',
          failures: Number(failures ?? 0),
          openUntil: state === 'open' && openUntil ? new Date(Number(openUntil)).toISOString() : null,
        },
      });
    });
    return states;
  }

  /** Each model's route health, by model key. */
  async healthOf(models: { key: string; provider: ProviderRoute }[]): Promise<Record<string, RouteHealth>> {
    const generators = await this.liveGenerators();
    const outcomes = models.length
      ? await this.bounded(this.redis.client.mget(...models.map((m) => this.outcomeKey(m.key, m.provider))))
      : [];
    const health: Record<string, RouteHealth> = {};
    models.forEach((m, i) => {
      const raw = outcomes[i];
      health[m.key] = routeHealth(m.provider, generators, raw ? (JSON.parse(raw) as RouteOutcome) : null);
    });
    return health;
  }

  /**
   * Refuses (400) a route to an upstream whose key some live generator does not hold: every
   * batch on it would fail. With no generator reporting, nothing is known and it is accepted.
   */
  async checkRouteUsable(route: ProviderRoute, field = 'provider'): Promise<void> {
    const needed = requiredKey(route);
    if (!needed) return;
    const generators = await this.liveGenerators();
    if (generators.some((names) => !names.includes(needed))) {
      throw new KilnError(
        ErrorCode.InvalidRequest,
        `Invalid ${field}.apiKeyEnv: the generators do not have ${needed} set; set it in their environment first`,
        { field: `${field}.apiKeyEnv`, reason: 'not_set_on_generators', missing: [needed] },
      );
    }
  }

  private async bounded<T>(promise: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        promise,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), READ_TIMEOUT_MS);
        }),
      ]);
    } catch (err) {
      throw new KilnError(
        ErrorCode.ServiceUnavailable,
        `Route health lives in Redis, which is unavailable (${(err as Error).message}); retry shortly`,
        {
          dependency: 'redis',
        },
      );
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A route in a model's chain as GET /v1/admin/models shows it. */
export interface RouteState {
  index: number;
  type: string;
  health: RouteHealth;
  circuit: { state: 'closed' | 'half_open' | 'open'; failures: number; openUntil: string | null };
}

/** A route's id in Redis keys: its label (type, address, upstream model; never a key), hashed. */
export function routeId(route: ProviderRoute): string {
  return createHash('sha256').update(routeLabel(route)).digest('hex').slice(0, 16);
}

/** Not configured beats failing: a missing key explains the failures. */
export function routeHealth(route: ProviderRoute, generators: string[][], last: RouteOutcome | null): RouteHealth {
  const needed = requiredKey(route);
  if (needed && generators.some((names) => !names.includes(needed))) return { state: 'not_configured', missing: [needed] };
  if (last && !last.ok) {
    return {
      state: 'failing',
      lastError: last.error ?? 'unknown error',
      errorCode: last.errorCode ?? null,
      status: last.status ?? null,
      lastErrorAt: last.at,
    };
  }
  if (!last && generators.length === 0) return { state: 'unknown', reason: 'no generator is reporting' };
  return { state: 'ok', lastSuccessAt: last?.at ?? null };
}
