import { randomBytes } from 'node:crypto';
import { buildConfig, KilnConfig } from '@app/config';
import { ModelConcurrencyLimiter, ModelLease } from '@app/generation';
import { RedisScript, RedisService } from '@app/redis';

/**
 * The model slot limiter against real Redis, without the apps: two RedisService clients on
 * one prefix stand in for two generator replicas. (generator.e2e-spec.ts covers expiry of a
 * dead worker's leases inside a booted generator.)
 */
describe('the model slot limiter shared through Redis', () => {
  let config: KilnConfig;
  let redis: RedisService;
  let otherRedis: RedisService;
  let models = 0;

  beforeAll(() => {
    const base = buildConfig(process.env);
    config = { ...base, redisPrefix: `${base.redisPrefix}:limiter-${randomBytes(3).toString('hex')}` };
    redis = new RedisService(config);
    otherRedis = new RedisService(config);
  });
  afterAll(async () => {
    await redis.onApplicationShutdown();
    await otherRedis.onApplicationShutdown();
  });
  afterEach(() => jest.restoreAllMocks());

  function limiter(cap: number, client = redis): ModelConcurrencyLimiter {
    return new ModelConcurrencyLimiter(client, { ...config, generator: { ...config.generator, modelConcurrencyCap: cap } });
  }
  const newModel = () => `model-${++models}`;

  /**
   * Script calls on `client` by kind, told apart by the statement only each script has
   * (EVALSHA or EVAL alike: RedisScript.run is what every script call goes through).
   */
  function countScripts(client: RedisService) {
    const spy = jest.spyOn(RedisScript.prototype, 'run');
    const of = (marker: string) =>
      spy.mock.calls.filter((call, i) => call[0] === client.client && (spy.mock.contexts[i] as RedisScript).lua.includes(marker)).length;
    return { acquires: () => of('local wanted'), handOvers: () => of('local fair') };
  }

  it('grants 50 waiters on an empty cap of 50 in one script call', async () => {
    const l = limiter(50);
    const model = newModel();
    const calls = countScripts(redis);
    const leases = await Promise.all(Array.from({ length: 50 }, (_, i) => l.acquire(model, { priority: i % 3 })));
    expect(calls.acquires()).toBe(1);
    expect(await l.inUse(model)).toBe(50);
    for (const lease of leases) lease.release();
    await waitFor('the slots to be free', async () => (await l.inUse(model)) === 0);
  });

  it('serves waiters that arrive while a call is out with the next call, all of them at once', async () => {
    const l = limiter(100);
    const model = newModel();
    const calls = countScripts(redis);
    const first = l.acquire(model);
    // Arrivals spread over the first call's round trip.
    const later: Promise<ModelLease>[] = [];
    for (let i = 0; i < 40; i++) {
      later.push(l.acquire(model));
      await Promise.resolve();
    }
    const leases = [await first, ...(await Promise.all(later))];
    expect(calls.acquires()).toBeLessThanOrEqual(2);
    expect(await l.inUse(model)).toBe(41);
    for (const lease of leases) lease.release();
    await waitFor('the slots to be free', async () => (await l.inUse(model)) === 0);
  });

  it('a released slot goes to the next waiter by priority in one call, the cap staying full', async () => {
    const l = limiter(2);
    const model = newModel();
    const holding = [await l.acquire(model), await l.acquire(model)];
    const order: number[] = [];
    let onServed: () => void = () => undefined;
    const priorities = [7, 3, 9, 3, 1, 7];
    const waiting = priorities.map((priority, i) =>
      l.acquire(model, { priority }).then((lease) => {
        order.push(i);
        onServed();
        return lease;
      }),
    );
    await sleep(50);
    expect(order).toEqual([]);

    const calls = countScripts(redis);
    const zrem = jest.spyOn(redis.client, 'zrem');
    // One slot at a time: each release serves the best waiter left.
    for (let served = 1; served <= priorities.length; served++) {
      const next = new Promise<void>((resolve) => (onServed = resolve));
      (holding.shift() as ModelLease).release();
      await next;
      expect(order).toHaveLength(served);
      holding.push(await waiting[order[served - 1]]);
      expect(calls.handOvers()).toBe(served);
      expect(await l.inUse(model)).toBe(2);
    }
    // No slot went back to the pool in between (a ZREM of the slots key).
    expect(zrem.mock.calls.filter(([key]) => key === l.slotsKey(model))).toEqual([]);
    // Priority first, arrival among equals.
    expect(order).toEqual([4, 1, 3, 0, 5, 2]);
    for (const lease of holding) lease.release();
    await waitFor('the slots to be free', async () => (await l.inUse(model)) === 0);
  });

  it('when slots free up together, the best waiters get them, in priority order', async () => {
    const l = limiter(3);
    const model = newModel();
    const held = await Promise.all([l.acquire(model), l.acquire(model), l.acquire(model)]);
    const order: number[] = [];
    const priorities = [5, 2, 8, 2, 0, 5, 1];
    const waiting = priorities.map((priority, i) => l.acquire(model, { priority }).then((lease) => (order.push(i), lease)));
    await sleep(30);
    for (const lease of held) lease.release();
    const firstThree = await Promise.all([waiting[4], waiting[6], waiting[1]]);
    expect(order).toEqual([4, 6, 1]);
    expect(await l.inUse(model)).toBe(3);
    for (const lease of firstThree) lease.release();
    const rest = await Promise.all([waiting[3], waiting[0], waiting[5]]);
    expect(order).toEqual([4, 6, 1, 3, 0, 5]);
    for (const lease of rest) lease.release();
    (await waiting[2]).release();
    expect(order).toEqual([4, 6, 1, 3, 0, 5, 2]);
    await waitFor('the slots to be free', async () => (await l.inUse(model)) === 0);
  });

  it('two replicas on one prefix never hold more than the cap, with aborts mixed in, and leak no slot', async () => {
    const cap = 5;
    const replicas = [limiter(cap, redis), limiter(cap, otherRedis)];
    const model = newModel();
    let holding = 0;
    let mostHeld = 0;
    let mostInRedis = 0;
    let granted = 0;
    let aborted = 0;
    const perReplica = [0, 0];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        mostInRedis = Math.max(mostInRedis, await replicas[0].inUse(model));
        await sleep(1);
      }
    })();

    const worker = async (replica: number, n: number) => {
      for (let round = 0; round < 4; round++) {
        const signal = (n + round) % 4 === 0 ? AbortSignal.timeout(Math.floor(Math.random() * 10)) : undefined;
        let lease: ModelLease;
        try {
          lease = await replicas[replica].acquire(model, { priority: Math.floor(Math.random() * 4), signal });
        } catch (err) {
          expect((err as Error).name).toBe('TimeoutError');
          aborted++;
          continue;
        }
        granted++;
        perReplica[replica]++;
        holding++;
        mostHeld = Math.max(mostHeld, holding);
        await sleep(Math.random() * 4);
        holding--;
        lease.release();
      }
    };
    await Promise.all(Array.from({ length: 60 }, (_, n) => worker(n % 2, n)));
    sampling = false;
    await sampler;

    expect(granted + aborted).toBe(240);
    expect(granted).toBeGreaterThan(150);
    expect(mostHeld).toBe(cap);
    expect(mostInRedis).toBeLessThanOrEqual(cap);
    expect(Math.min(...perReplica)).toBeGreaterThan(granted / 4);
    // A slot granted to a waiter that had just aborted is given back, not kept until expiry.
    await waitFor('the slots to be free', async () => (await replicas[0].inUse(model)) === 0, 5000);
  });

  it('replicas short of slots share the cap evenly, instead of one keeping every slot it releases', async () => {
    const replicas = [limiter(4, redis), limiter(4, otherRedis)];
    const model = newModel();
    const shared = await sharesOnceTheSecondJoins(replicas, model, {
      workers: 8,
      holdMs: 5,
      // The first replica starts alone and takes every slot; the second arrives with as big a backlog.
      firstAlone: async (grants) => {
        await sleep(200);
        expect(grants[1]).toBe(0);
      },
      joinedMs: 1000,
    });
    expect(shared[1]).toBeGreaterThan(0.35 * (shared[0] + shared[1]));
    expect(shared[0]).toBeGreaterThan(0.35 * (shared[0] + shared[1]));
    await waitFor('the slots to be free', async () => (await replicas[0].inUse(model)) === 0);
  });

  it('a lease that expired before its release is not handed over: the slot may be counted elsewhere', async () => {
    const l = limiter(1);
    const model = newModel();
    const key = l.slotsKey(model);
    const lease = await l.acquire(model);
    const [member] = await redis.client.zrange(key, 0, -1);
    const waiting = l.acquire(model);
    let served = false;
    void waiting.then(() => (served = true));
    // In one step: this replica's lease runs out, and another replica takes the freed slot.
    const now = await serverMs();
    await redis.client.zadd(key, now - 1, member, now + 60_000, 'other-replica:1');

    lease.release();
    await sleep(150);
    expect(served).toBe(false);
    expect(await l.inUse(model)).toBe(1);
    expect(await redis.client.zrange(key, 0, -1)).toEqual(['other-replica:1']);

    await redis.client.zrem(key, 'other-replica:1');
    (await waiting).release();
    await waitFor('the slot to be free', async () => (await l.inUse(model)) === 0);
  });

  it('an aborted waiter leaves the line; slots granted to waiters aborted mid-call are given back', async () => {
    const l = limiter(1);
    const model = newModel();
    const held = await l.acquire(model);
    const controller = new AbortController();
    const first = l.acquire(model, { priority: 1, signal: controller.signal });
    const second = l.acquire(model, { priority: 2 });
    controller.abort(new Error('stop'));
    await expect(first).rejects.toThrow('stop');
    held.release();
    (await second).release();
    await waitFor('the slot to be free', async () => (await l.inUse(model)) === 0);

    const wide = limiter(10);
    const other = newModel();
    const aborting = new AbortController();
    const realRun = RedisScript.prototype.run;
    // Every waiter aborts while its slots are being granted.
    jest.spyOn(RedisScript.prototype, 'run').mockImplementationOnce(function (this: RedisScript, ...args: Parameters<RedisScript['run']>) {
      aborting.abort(new Error('gone'));
      return realRun.apply(this, args);
    });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => wide.acquire(other, { signal: aborting.signal })));
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    await waitFor('the slots to be given back', async () => (await wide.inUse(other)) === 0, 2000, 20);
  });

  it("a model's own cap (its route's maxConcurrency) overrides MODEL_CONCURRENCY_CAP, in both directions", async () => {
    const l = limiter(100);
    const narrow = newModel();
    const waiting = Array.from({ length: 5 }, () => l.acquire(narrow, { cap: 2 }));
    const granted: ModelLease[] = [];
    waiting.forEach((p) => void p.then((lease) => granted.push(lease)));
    await waitFor('two slots', () => granted.length === 2);
    await sleep(100);
    expect(granted).toHaveLength(2);
    expect(await l.inUse(narrow)).toBe(2);
    // A release hands its slot over; the cap of 2 still holds.
    granted[0].release();
    await waitFor('the next waiter', () => granted.length === 3);
    expect(await l.inUse(narrow)).toBe(2);
    for (const lease of granted.slice(1)) lease.release();
    await waitFor('the last two waiters', () => granted.length === 5);
    for (const lease of granted.slice(3)) lease.release();
    await waitFor('the slots to be free', async () => (await l.inUse(narrow)) === 0);

    const tight = limiter(1);
    const wide = newModel();
    const leases = await Promise.all(Array.from({ length: 3 }, () => tight.acquire(wide, { cap: 3 })));
    expect(await tight.inUse(wide)).toBe(3);
    for (const lease of leases) lease.release();
    await waitFor('the slots to be free', async () => (await tight.inUse(wide)) === 0);
  });

  it("with a route's pace hash named, the cap is the hash's window (up to the ceiling), not the replica's own view of it", async () => {
    const l = limiter(100);
    const model = newModel();
    const paceKey = redis.key('route-pace', model, 'test');
    // Another replica's answers grew the shared window to 6; this one last saw 2.
    await redis.client.hset(paceKey, 'window', '6.4');
    const granted: ModelLease[] = [];
    const waiting = Array.from({ length: 10 }, () => l.acquire(model, { cap: 2, pacing: { key: paceKey, ceiling: 8 } }));
    waiting.forEach((p) => void p.then((lease) => granted.push(lease)));
    await waitFor('six slots', () => granted.length === 6);
    await sleep(100);
    expect(granted).toHaveLength(6);
    expect(await l.inUse(model)).toBe(6);
    // A window past the route's ceiling (maxConcurrency lowered since) is held to the ceiling.
    await redis.client.hset(paceKey, 'window', '50');
    granted[0].release();
    await waitFor('eight slots in use', async () => (await l.inUse(model)) === 8, 3000, 20);
    await sleep(100);
    expect(await l.inUse(model)).toBe(8);
    // The six first, the released slot handed over, two more for the higher cap.
    expect(granted).toHaveLength(9);
    for (const lease of granted.slice(1)) lease.release();
    await waitFor('the last waiter', () => granted.length === 10);
    granted[9].release();
    await waitFor('the slots to be free', async () => (await l.inUse(model)) === 0);
    await redis.client.del(paceKey);
  });

  it('a replica that holds no slot still learns the shared window: it gets its share instead of being starved by its stale cap', async () => {
    const replicas = [limiter(100, redis), limiter(100, otherRedis)];
    const model = newModel();
    const pacing = { key: redis.key('route-pace', model, 'test'), ceiling: 20 };
    await redis.client.hset(pacing.key, 'window', '20');
    // The first replica's own view is the shared window; the second last saw 8 (the window a
    // route starts at), while the first already holds more slots than that.
    const caps = [20, 8];
    const shared = await sharesOnceTheSecondJoins(replicas, model, {
      workers: 30,
      holdMs: 20,
      acquire: (replica) => ({ cap: caps[replica], pacing }),
      firstAlone: () => waitFor('the first replica to fill the window', async () => (await replicas[0].inUse(model)) === 20),
      joinedMs: 1500,
    });
    // Even shares of 20: with its own cap of 8 the second replica got no slot while the first
    // held 20, and, counted short of slots, held the first to 10: half the window idle.
    expect(shared[1]).toBeGreaterThan(0.35 * (shared[0] + shared[1]));
    expect(shared[0]).toBeGreaterThan(0.35 * (shared[0] + shared[1]));
    await waitFor('the slots to be free', async () => (await replicas[0].inUse(model)) === 0);
    await redis.client.del(pacing.key);
  });

  /**
   * Two replicas' workers each take a slot, hold it `holdMs` and give it back, over and over:
   * the first replica's alone until `firstAlone` resolves, then both for `joinedMs`. Returns the
   * slots each replica got while both were at it.
   */
  async function sharesOnceTheSecondJoins(
    replicas: ModelConcurrencyLimiter[],
    model: string,
    run: {
      workers: number;
      holdMs: number;
      acquire?: (replica: number) => Parameters<ModelConcurrencyLimiter['acquire']>[1];
      firstAlone: (grants: number[]) => Promise<void>;
      joinedMs: number;
    },
  ): Promise<[number, number]> {
    const grants = [0, 0];
    let running = true;
    const worker = async (replica: number) => {
      while (running) {
        const lease = await replicas[replica].acquire(model, run.acquire?.(replica));
        grants[replica]++;
        await sleep(run.holdMs);
        lease.release();
      }
    };
    const workers = Array.from({ length: run.workers }, () => worker(0));
    await run.firstAlone(grants);
    const firstBefore = grants[0];
    workers.push(...Array.from({ length: run.workers }, () => worker(1)));
    await sleep(run.joinedMs);
    const shared: [number, number] = [grants[0] - firstBefore, grants[1]];
    running = false;
    await Promise.all(workers);
    return shared;
  }

  async function serverMs(): Promise<number> {
    const [seconds, micros] = await redis.client.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 5000, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
