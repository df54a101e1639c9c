import { randomBytes } from 'node:crypto';
import { buildConfig, KilnConfig } from '@app/config';
import { ModelConcurrencyLimiter, QUIET_RECHECK_MS, RoutePacer } from '@app/generation';
import { KilnMetrics } from '@app/metrics';
import { ProviderError } from '@app/providers';
import { RedisService } from '@app/redis';

/**
 * A quiet route (no pause, no header budget, no rate, its window at maxConcurrency) is
 * admitted without asking Redis for QUIET_RECHECK_MS at a time; anything that could hold it
 * back is still seen: another generator's 429 within that time, this generator's own at once.
 * Real Redis; the calls are local functions, as only the pacer's traffic is measured.
 */
describe('route pacing: quiet routes', () => {
  let config: KilnConfig;
  const clients: RedisService[] = [];
  let models = 0;

  beforeAll(() => {
    const base = buildConfig(process.env);
    config = { ...base, redisPrefix: `${base.redisPrefix}:quiet-${randomBytes(3).toString('hex')}` };
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.onApplicationShutdown()));
  });

  /** A generator's pacer, and how many of the pacer's own scripts (on a route-pace key) it has sent to Redis. */
  function generator(): { pacer: RoutePacer; scripts: () => number } {
    const redis = new RedisService(config);
    clients.push(redis);
    let scripts = 0;
    const client = redis.client as unknown as Record<'evalsha' | 'eval', (...args: unknown[]) => Promise<unknown>>;
    for (const name of ['evalsha', 'eval'] as const) {
      const real = client[name].bind(redis.client);
      client[name] = (...args: unknown[]) => {
        // (script, numkeys, key1, ...): the pacer's scripts name the route's pace hash first.
        if (String(args[2]).includes(':route-pace:')) scripts++;
        return real(...args);
      };
    }
    return { pacer: new RoutePacer(redis, new ModelConcurrencyLimiter(redis, config), new KilnMetrics()), scripts: () => scripts };
  }

  const route = (maxConcurrency = 4) => ({ model: `quiet-${++models}`, upstream: 'local', maxConcurrency });
  const clean = () => Promise.resolve({ ok: true });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('clean answers without headers on a route at its full window: one admission asked of Redis per recheck, not two scripts a call', async () => {
    const g = generator();
    const r = route(4);
    const started = Date.now();
    let done = 0;
    while (done < 40) {
      await Promise.all(Array.from({ length: 4 }, () => g.pacer.run(r, {}, clean)));
      done += 4;
    }
    const periods = Math.ceil((Date.now() - started) / QUIET_RECHECK_MS);
    // The first 4 calls at once are each admitted by Redis (none knew the route quiet yet; their
    // clean answers are not told), then one admission per period.
    expect(g.scripts()).toBeLessThanOrEqual(4 + periods);
    expect(g.scripts()).toBeLessThan(done);

    // A route with a rate is never quiet: the same calls ask Redis twice each.
    const rated = generator();
    for (let i = 0; i < done / 4; i++)
      await Promise.all(Array.from({ length: 4 }, () => rated.pacer.run({ ...route(4), ratePerMinute: 600_000 }, {}, clean)));
    expect(rated.scripts()).toBe(2 * done);
  });

  it("another generator's 429 holds a quiet route within QUIET_RECHECK_MS", async () => {
    const [a, b] = [generator(), generator()];
    const r = route(4);
    await a.pacer.run(r, {}, clean);
    // b is refused with Retry-After: the route pauses for everyone.
    const refused = b.pacer.run(r, {}, () =>
      Promise.reject(new ProviderError('rate_limited', 'slow down', { status: 429, retryAfterMs: 1500 })),
    );
    const outcome = refused.catch(() => undefined);
    await sleep(QUIET_RECHECK_MS + 50);
    const waitStarted = Date.now();
    await a.pacer.run(r, {}, clean);
    // Past the recheck, a asks Redis again and waits for the pause (about 1.5 s from the 429).
    expect(Date.now() - waitStarted).toBeGreaterThanOrEqual(800);
    await outcome;
  });

  it("a quiet generator's own 429 ends its quiet at once: its next call waits for the pause", async () => {
    const g = generator();
    const r = route(4);
    await g.pacer.run(r, {}, clean);
    const admitted = await g.pacer.admit(r);
    expect(admitted.quiet).toBe(true);
    await g.pacer.answered(admitted, { kind: 'refused', retryAfterMs: 1000 }, 1);
    const waitStarted = Date.now();
    const next = await g.pacer.admit(r);
    expect(Date.now() - waitStarted).toBeGreaterThanOrEqual(700);
    // The pause is over; nothing else holds the route back, so Redis says it is quiet again.
    expect(next.startSeq).toBeGreaterThan(0);
  });
});
