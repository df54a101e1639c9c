import { randomBytes } from 'node:crypto';
import { buildConfig, KilnConfig } from '@app/config';
import { FREE_RATE_LIMIT_RETRIES, INITIAL_WINDOW, ModelConcurrencyLimiter, PACING_BETA, PLATEAU_ROUNDS, RoutePacer } from '@app/generation';
import { KilnMetrics } from '@app/metrics';
import { OpenAiProvider, ProviderError, RenderRequest } from '@app/providers';
import { CapturedRequest, RateLimitedOpenAiFake, StrictLimits } from '@app/testing';
import { RedisScript, RedisService } from '@app/redis';

/**
 * Route pacing against real Redis and a fake OpenAI upstream with a strict limit on
 * 127.0.0.1, without the apps: each "generator" is its own RedisService, concurrency
 * limiter and pacer on one prefix, calling through the real openai provider (so the
 * rate-limit headers and 429s are parsed as in production). generator-openai.e2e-spec.ts
 * covers the pacing inside a booted generator (a 429 spends no attempt, Retry-After).
 */
describe('route pacing shared through Redis', () => {
  let config: KilnConfig;
  const clients: RedisService[] = [];
  const upstreams: RateLimitedOpenAiFake[] = [];
  let models = 0;

  beforeAll(() => {
    const base = buildConfig(process.env);
    // What is tested is the pacing, not Redis's command timeout (500 ms by default): on a
    // heavily loaded machine the first calls of a fresh client timed out and failed the test.
    const redisCommandTimeoutMs = Math.max(base.redisCommandTimeoutMs, 5000);
    config = { ...base, redisCommandTimeoutMs, redisPrefix: `${base.redisPrefix}:pacing-${randomBytes(3).toString('hex')}` };
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.onApplicationShutdown()));
    await Promise.all(upstreams.map((u) => u.stop()));
  });

  interface Generator {
    pacer: RoutePacer;
    metrics: KilnMetrics;
    refusals: number;
  }

  function generator(): Generator {
    const redis = new RedisService(config);
    clients.push(redis);
    const limiter = new ModelConcurrencyLimiter(redis, config);
    const metrics = new KilnMetrics();
    return { pacer: new RoutePacer(redis, limiter, metrics), metrics, refusals: 0 };
  }

  async function upstream(
    limits: StrictLimits,
    sentAt?: (req: CapturedRequest) => number | undefined,
  ): Promise<{ fake: RateLimitedOpenAiFake; provider: OpenAiProvider }> {
    const fake = new RateLimitedOpenAiFake(limits, sentAt);
    upstreams.push(fake);
    const baseUrl = await fake.start();
    const provider = new OpenAiProvider({
      baseUrl,
      apiKey: 'sk-test',
      model: 'gpt-image-1',
      timeoutMs: 10_000,
      allowPrivate: true,
      maxImageBytes: 1 << 20,
    });
    return { fake, provider };
  }

  const request: RenderRequest = {
    prompt: 'paced',
    seed: 1,
    width: 64,
    height: 64,
    resolution: '1K',
    aspectRatio: '1:1',
    quality: null,
    background: null,
    references: [],
  };

  /**
   * When a call was handed to the provider (its prompt carries it): the fake runs in this
   * process, so under load a stall of the process lies between a call's send and the fake's
   * handler, 120-220 ms for every call of a window in a run that failed, past the 50 ms the
   * pacer allows for a call's way to the upstream. Counted from the send, the fake sees the
   * calls as an upstream on another machine would.
   */
  const sentAt = (req: CapturedRequest) =>
    Number(/^paced (\d+)$/.exec((JSON.parse(req.body.toString('utf8')) as { prompt: string }).prompt)?.[1]) || undefined;

  /** `count` calls through one generator's pacer; each resolves or rejects like a task's attempt. */
  function calls(
    g: Generator,
    route: { model: string; maxConcurrency: number; ratePerMinute?: number },
    provider: OpenAiProvider,
    count: number,
  ) {
    return Array.from({ length: count }, () =>
      g.pacer
        .run({ ...route, upstream: 'openai fake' }, { onRefusal: () => g.refusals++ }, () =>
          provider.render({ ...request, prompt: `paced ${Date.now()}` }),
        )
        .then(
          () => 'ok' as const,
          (err: unknown) => err,
        ),
    );
  }

  const newModel = () => `paced-${++models}`;

  /** Waits for the next start of the fake's one-second windows (they follow the clock's seconds). */
  const untilWindowStart = () => new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000)));

  it('two generators share one limit: with OpenAI headers answered within the reset, no call goes past the remaining count', async () => {
    const { fake, provider } = await upstream({ perSecond: 10, maxConcurrent: 40, latencyMs: 200, openAiHeaders: true }, sentAt);
    const [a, b] = [generator(), generator()];
    const route = { model: newModel(), maxConcurrency: 50 };
    // The first answers tell the budget: until then each generator may send the window, so the
    // first second is primed with one call, as a generator's first task would be. Sent as the
    // upstream's window begins, its reset tells the window's whole length (see the next test for
    // a first answer from late in a window).
    await untilWindowStart();
    const started = Date.now();
    expect(await calls(a, route, provider, 1)[0]).toBe('ok');
    const results = await Promise.all([...calls(a, route, provider, 20), ...calls(b, route, provider, 20)]);
    expect(results.every((r) => r === 'ok')).toBe(true);
    expect(fake.accepted).toBe(41);
    expect(fake.refused).toBe(0);
    // 41 calls at 10 a second: at least four window resets.
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
  });

  it('a first answer from late in a window (a short reset) costs at most a window of refusals while the pacer learns the length, and none reaches a caller', async () => {
    const { fake, provider } = await upstream({ perSecond: 10, maxConcurrent: 40, latencyMs: 200, openAiHeaders: true }, sentAt);
    const [a, b] = [generator(), generator()];
    const route = { model: newModel(), maxConcurrency: 50 };
    // Primed 750 ms into the upstream's window, the first reset says 250 ms: the longest reset
    // seen is all the pacer knows of the window's length until a longer one comes back, so a
    // window it rolls on by that span can begin before the upstream's has (in loaded CI runs,
    // 3-7 refusals when the answers placing the true boundary came back just after that roll).
    await untilWindowStart();
    await new Promise((resolve) => setTimeout(resolve, 750));
    expect(await calls(a, route, provider, 1)[0]).toBe('ok');
    const results = await Promise.all([...calls(a, route, provider, 20), ...calls(b, route, provider, 20)]);
    expect(results.every((r) => r === 'ok')).toBe(true);
    expect(fake.accepted).toBe(41);
    // Without pacing, 40 calls at once against 10 a second: 30 refused in the first second.
    expect(fake.refused).toBeLessThanOrEqual(10);
    expect(a.refusals + b.refusals).toBe(fake.refused);
  });

  it('calls made well after their admission (a stalled generator) place the reset from when they were made: no call sent into the old window', async () => {
    const { fake, provider } = await upstream({ perSecond: 10, maxConcurrent: 40, latencyMs: 200, openAiHeaders: true }, sentAt);
    const g = generator();
    const route = { model: newModel(), maxConcurrency: 50, upstream: 'openai fake' };
    // The first ten calls wait 150 ms between their admission and their send (past the 50 ms
    // margin), as every call of a window did in a loaded CI run; the later ones go at once. Their
    // answers alone place the first boundary: counted from the admission it fell 100 ms early and
    // the next ten, sent at once, reached the upstream inside the full window.
    let stalls = 10;
    const stalled = () =>
      g.pacer.run(
        route,
        {
          beforeFirstCall: () => (stalls-- > 0 ? new Promise<void>((resolve) => setTimeout(resolve, 150)) : Promise.resolve()),
          onRefusal: () => g.refusals++,
        },
        () => provider.render({ ...request, prompt: `paced ${Date.now()}` }),
      );
    await Promise.all(Array.from({ length: 30 }, stalled));
    expect(fake.accepted).toBe(30);
    // Counted from the admission, the boundary fell early and the ten calls sent at once all went
    // into the old window (ten refusals). On a loaded machine (a CI run, Redis answering late) a
    // stall beyond the pacer's margin can still put a call or two past a boundary: at most two.
    expect(fake.refused).toBeLessThanOrEqual(2);
    expect(g.refusals).toBeLessThanOrEqual(2);
  });

  it('answers slower than the reset (as images are) still place the windows: few 429s, every call done', async () => {
    const { fake, provider } = await upstream({ perSecond: 10, maxConcurrent: 40, latencyMs: 1300, openAiHeaders: true });
    const [a, b] = [generator(), generator()];
    const route = { model: newModel(), maxConcurrency: 50 };
    expect(await calls(a, route, provider, 1)[0]).toBe('ok');
    const results = await Promise.all([...calls(a, route, provider, 30), ...calls(b, route, provider, 30)]);
    expect(results.every((r) => r === 'ok')).toBe(true);
    expect(fake.accepted).toBe(61);
    // Without pacing, 60 calls at once against 10 a second: 50 refused in the first second alone.
    expect(fake.refused).toBeLessThanOrEqual(20);
  });

  it('an answer placing the boundary the route has just rolled past moves the boundary later and leaves the budget: never a second full window', async () => {
    const g = generator();
    const route = { model: newModel(), maxConcurrency: 50, upstream: 'openai fake' };
    const redis = clients[clients.length - 1];
    const key = g.pacer.paceKey(route);
    // As found in a bench run: ADMIT has just rolled the window on by the longest reset seen
    // (986 ms, the upstream's being 1 s), so 16 of the new window's 20 are left...
    const now = Date.now();
    await redis.client.hset(
      key,
      'budget',
      '16',
      'budgetUntil',
      String(now + 970),
      'span',
      '986',
      'limit',
      '20',
      'starts',
      '100',
      'window',
      '30',
    );
    // ...when the answer of a call started 960 ms ago comes back (1 s latency) saying its own
    // window, the previous one, ends 70 ms from now: later than the roll assumed.
    await g.pacer.answered(
      { route, startSeq: 90, startedAt: now - 960, askedAt: now - 960, local: false },
      { kind: 'ok', rateHeaders: { remaining: 3, limit: 20, resetMs: 980 } },
      1,
    );
    const [budget, budgetUntil] = await redis.client.hmget(key, 'budget', 'budgetUntil');
    expect(Number(budget)).toBe(16);
    // The current window's end moves with it: 70 ms + one window from now, not 70 ms.
    expect(Number(budgetUntil)).toBe(now + 70 + 986);
    // Past the old window's end the route is still in the same window: the next call spends
    // its 16th, where taking the answer as the current window's made ADMIT roll on to 20.
    await new Promise((resolve) => setTimeout(resolve, 120));
    await g.pacer.admit({ ...route, maxConcurrency: 50 });
    expect(Number(await redis.client.hget(key, 'budget'))).toBe(15);
  });

  it('a 429 storm (no headers) shrinks the shared window to about what the upstream takes, clean answers grow it back; the 429s reach no caller', async () => {
    const { fake, provider } = await upstream({ perSecond: 100_000, maxConcurrent: 100_000, latencyMs: 100, openAiHeaders: false });
    const [a, b] = [generator(), generator()];
    const model = newModel();
    const route = { model, maxConcurrency: 60 };
    const window = () =>
      Math.max(a.pacer.windowOf({ ...route, upstream: 'openai fake' }), b.pacer.windowOf({ ...route, upstream: 'openai fake' }));
    const rounds = async (count: number, until: (w: number) => boolean) => {
      for (let r = 0; r < count && !until(window()); r++) {
        const half = Math.ceil(window() / 2);
        await Promise.all([...calls(a, route, provider, half), ...calls(b, route, provider, half)]);
      }
    };
    // Slow start from 8: it doubles each clean round, up to maxConcurrency.
    await rounds(20, (w) => w >= 60);
    expect(window()).toBe(60);
    expect(fake.refused).toBe(0);

    // The upstream now takes 8 at once: the first round is a storm of 429s.
    fake.limits = { ...fake.limits, maxConcurrent: 8 };
    const before = fake.accepted;
    const results = await Promise.all([...calls(a, route, provider, 60), ...calls(b, route, provider, 60)]);
    // Every call got its image: the 429s were asked again within the call (none reached the caller).
    expect(results.filter((r) => r !== 'ok')).toEqual([]);
    expect(fake.accepted - before).toBe(120);
    // A storm: the burst past the new limit was refused. Its size depends on how soon the first
    // 429s cut the window every generator caps at (20-50 refused in runs since the limiter reads
    // the shared window; 40 and more when each generator capped at its own view of it).
    expect(fake.refused).toBeGreaterThanOrEqual(10);
    expect(a.refusals + b.refusals).toBe(fake.refused);
    const shrunk = window();
    expect(shrunk).toBeLessThanOrEqual(12);
    expect(fake.maxInFlight).toBeGreaterThanOrEqual(8);

    // Room again: one more call per round of clean answers.
    fake.limits = { ...fake.limits, maxConcurrent: 100_000 };
    const refusedBefore = fake.refused;
    await rounds(12, () => false);
    expect(window()).toBeGreaterThanOrEqual(shrunk + 6);
    expect(window()).toBeLessThanOrEqual(60);
    expect(fake.refused).toBe(refusedBefore);
  });

  it(`after a cut, clean answers grow the window back one per round to one below the refused level, hold there ${PLATEAU_ROUNDS} rounds, then probe it`, async () => {
    const g = generator();
    const route = { model: newModel(), maxConcurrency: 60, upstream: 'openai fake' };
    const redis = clients[clients.length - 1];
    // As after a round refused at 21 calls in flight: cut to 0.9 of it, the ceiling at 21.
    await redis.client.hset(g.pacer.paceKey(route), 'window', '18.9', 'threshold', '18.9', 'ceiling', '21');
    const clean = async (until: (w: number) => boolean): Promise<number> => {
      for (let answers = 1; answers <= 500; answers++) {
        await g.pacer.answered({ route, startSeq: answers, startedAt: Date.now(), askedAt: Date.now(), local: false }, { kind: 'ok' }, 1);
        if (until(g.pacer.windowOf(route))) return answers;
      }
      throw new Error('the window never got there');
    };
    // 18.9 -> 20: about one round (a clean answer per call in flight adds one).
    expect(await clean((w) => w >= 20)).toBeLessThanOrEqual(25);
    // 20 -> 21 (the level refused): PLATEAU_ROUNDS rounds of 20 answers.
    const plateau = await clean((w) => w >= 21);
    expect(plateau).toBeGreaterThanOrEqual(PLATEAU_ROUNDS * 20 - 3);
    expect(plateau).toBeLessThanOrEqual(PLATEAU_ROUNDS * 20 + 3);
    // Past it (the upstream took 21 this time), one more per round again.
    expect(await clean((w) => w >= 22)).toBeLessThanOrEqual(23);
    // The window is the route's: the same model routed to another upstream starts afresh.
    expect(g.pacer.windowOf({ ...route, upstream: 'another upstream' })).toBe(INITIAL_WINDOW);
  });

  it('Retry-After pauses every generator on the route; ratePerMinute spaces the calls', async () => {
    const { fake, provider } = await upstream({ perSecond: 1000, maxConcurrent: 1000, latencyMs: 10, openAiHeaders: false });
    const [a, b] = [generator(), generator()];
    const route = { model: newModel(), maxConcurrency: 10 };
    fake.answerNext({
      status: 429,
      headers: { 'content-type': 'application/json', 'retry-after-ms': '600' },
      body: '{"error":{"message":"slow down"}}',
    });
    const first = calls(a, route, provider, 1)[0];
    while (a.refusals === 0) await new Promise((r) => setTimeout(r, 5));
    // a's 429 has been told to the pacer: b, another generator, waits out the same pause.
    const t = Date.now();
    expect(await calls(b, route, provider, 1)[0]).toBe('ok');
    expect(Date.now() - t).toBeGreaterThanOrEqual(400);
    expect(await first).toBe('ok');
    expect(fake.requests).toHaveLength(3);

    const rated = { model: newModel(), maxConcurrency: 10, ratePerMinute: 300 };
    const before = fake.accepted;
    const t0 = Date.now();
    await Promise.all([...calls(a, rated, provider, 10), ...calls(b, rated, provider, 10)]);
    // 300 a minute is 5 a second, with a burst of 5: 20 calls need at least 3 s.
    expect(fake.accepted - before).toBe(20);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2500);
  });

  it('a 429 that is not a rate (insufficient_quota) fails the call at once; refusals past FREE_RATE_LIMIT_RETRIES reach the caller', async () => {
    const { fake, provider } = await upstream({ perSecond: 1000, maxConcurrent: 1000, latencyMs: 1, openAiHeaders: false });
    const g = generator();
    const route = { model: newModel(), maxConcurrency: 4 };
    fake.answerNext({
      status: 429,
      headers: { 'content-type': 'application/json' },
      body: '{"error":{"code":"insufficient_quota","message":"quota"}}',
    });
    const quota = await calls(g, route, provider, 1)[0];
    expect(quota).toBeInstanceOf(ProviderError);
    expect(g.refusals).toBe(0);
    const busy = { status: 429, headers: { 'content-type': 'application/json' }, body: '{"error":{"message":"busy"}}' };
    fake.answerNext(...Array.from({ length: FREE_RATE_LIMIT_RETRIES + 1 }, () => busy));
    const last = await calls(g, route, provider, 1)[0];
    expect(last).toMatchObject({ kind: 'rate_limited' });
    expect(g.refusals).toBe(FREE_RATE_LIMIT_RETRIES);
    expect(PACING_BETA).toBeLessThan(1);
  });

  it('Redis not answering: the pacer falls back to its own limits instead of stopping', async () => {
    const { provider } = await upstream({ perSecond: 1000, maxConcurrent: 1000, latencyMs: 1, openAiHeaders: false });
    const g = generator();
    const route = { model: newModel(), maxConcurrency: 4 };
    const redis = clients[clients.length - 1];
    const original = RedisScript.prototype.run;
    const evalSpy = jest.spyOn(RedisScript.prototype, 'run').mockImplementation(function (
      this: RedisScript,
      ...args: Parameters<RedisScript['run']>
    ) {
      // The limiter's scripts still run; the pacer's never answer on this generator's client (a Redis that hangs for it).
      if (args[0] === redis.client && this.lua.includes('budgetUntil')) return new Promise(() => undefined);
      return original.apply(this, args);
    });
    try {
      const t = Date.now();
      const results = await Promise.all(calls(g, route, provider, 3));
      expect(results).toEqual(['ok', 'ok', 'ok']);
      // One bounded wait (1 s) before the fallback took over, not one per call.
      expect(Date.now() - t).toBeLessThan(10_000);
      expect((await g.metrics.upstreamPacingFallback.get()).values[0].value).toBeGreaterThanOrEqual(1);
    } finally {
      evalSpy.mockRestore();
    }
  });
});
