import { randomBytes } from 'node:crypto';
import { RouteHealthStore } from '@app/catalog';
import { buildConfig, KilnConfig } from '@app/config';
import { CircuitRoute, RouteCircuit } from '@app/generation';
import { KilnMetrics } from '@app/metrics';
import { FAILOVER_DEFAULTS, FailoverSettings } from '@app/providers';
import { RedisService } from '@app/redis';

/**
 * The route circuit shared by every generator through Redis (closed, open, half-open with one
 * probe), its reading by the admin API, and its local fallback when Redis does not answer.
 * Real Redis; two RouteCircuit instances stand for two generators.
 */
describe('route circuit', () => {
  let config: KilnConfig;
  const clients: RedisService[] = [];
  const circuits: RouteCircuit[] = [];
  let models = 0;
  const settings: FailoverSettings = { ...FAILOVER_DEFAULTS, failuresToOpen: 3, cooldownMs: 1000 };

  beforeAll(() => {
    const base = buildConfig(process.env);
    config = { ...base, redisPrefix: `${base.redisPrefix}:circuit-${randomBytes(3).toString('hex')}` };
  });
  afterAll(async () => {
    for (const c of circuits) c.onModuleDestroy();
    await Promise.all(clients.map((c) => c.onApplicationShutdown()));
  });

  function generator(): { circuit: RouteCircuit; health: RouteHealthStore; metrics: KilnMetrics; redis: RedisService } {
    const redis = new RedisService(config);
    clients.push(redis);
    const health = new RouteHealthStore(redis);
    const metrics = new KilnMetrics();
    const circuit = new RouteCircuit(health, metrics);
    circuits.push(circuit);
    return { circuit, health, metrics, redis };
  }
  const route = (): CircuitRoute => ({ model: `circuit-${++models}`, index: 0, route: { type: 'simulated' } });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('failuresToOpen failures in a row open it for every generator; a success in between starts the count again', async () => {
    const [a, b] = [generator(), generator()];
    const r = route();
    expect(await a.circuit.record(r, settings, 'failure', false)).toBe('closed');
    expect(await b.circuit.record(r, settings, 'failure', false)).toBe('closed');
    expect(await a.circuit.record(r, settings, 'ok', false)).toBe('closed');
    expect(await a.circuit.record(r, settings, 'failure', false)).toBe('closed');
    expect(await b.circuit.record(r, settings, 'failure', false)).toBe('closed');
    expect(await a.circuit.admit(r, settings)).toEqual({ go: true, probe: false });
    expect(await b.circuit.record(r, settings, 'failure', false)).toBe('open');
    const refused = await a.circuit.admit(r, settings);
    expect(refused).toEqual({ go: false, waitMs: expect.any(Number) });
    expect((refused as { waitMs: number }).waitMs).toBeGreaterThan(0);
    expect((refused as { waitMs: number }).waitMs).toBeLessThanOrEqual(1000);
    // The admin API reads the same hash.
    const [state] = (await a.health.routesHealthOf([{ key: r.model, routes: [r.route] }]))[r.model];
    expect(state.circuit).toMatchObject({ state: 'open', failures: 3, openUntil: expect.any(String) });
    const metrics = await a.metrics.registry.getSingleMetricAsString('kiln_route_circuit_state');
    expect(metrics).toContain(`kiln_route_circuit_state{model="${r.model}",route="0/simulated"} 2`);
  });

  it('an opening is announced: another generator sees the route open before its own next admission or answer', async () => {
    const [a, b, deaf] = [generator(), generator(), generator()];
    await b.circuit.listen();
    const r = route();
    for (let i = 0; i < 3; i++) await a.circuit.record(r, settings, 'failure', false);
    // b asked Redis nothing since: only the announcement can have told it (deaf did not listen).
    for (let waited = 0; !b.circuit.seenOpen(r) && waited < 2000; waited += 20) await sleep(20);
    expect(b.circuit.seenOpen(r)).toBe(true);
    expect(deaf.circuit.seenOpen(r)).toBe(false);
    // Until the cooldown ends, as if b had seen it itself.
    await sleep(1050);
    expect(b.circuit.seenOpen(r)).toBe(false);
  });

  it('after the cooldown exactly one task of all generators probes; its failure re-opens, its success closes', async () => {
    const gens = [generator(), generator(), generator()];
    const r = route();
    for (let i = 0; i < 3; i++) await gens[0].circuit.record(r, settings, 'failure', false);
    await sleep(1050);
    const verdicts = await Promise.all(gens.flatMap((g) => [g.circuit.admit(r, settings), g.circuit.admit(r, settings)]));
    expect(verdicts.filter((v) => v.go)).toEqual([{ go: true, probe: true }]);
    // A late failure of a call sent before the circuit opened does not decide it: only the probe's.
    expect(await gens[1].circuit.record(r, settings, 'failure', false)).toBe('half_open');
    expect(await gens[0].circuit.record(r, settings, 'failure', true)).toBe('open');
    expect((await gens[2].circuit.admit(r, settings)).go).toBe(false);
    await sleep(1050);
    const again = await Promise.all(gens.map((g) => g.circuit.admit(r, settings)));
    expect(again.filter((v) => v.go)).toHaveLength(1);
    expect(await gens[1].circuit.record(r, settings, 'ok', true)).toBe('closed');
    expect(await Promise.all(gens.map((g) => g.circuit.admit(r, settings)))).toEqual(gens.map(() => ({ go: true, probe: false })));
    const [state] = (await gens[0].health.routesHealthOf([{ key: r.model, routes: [r.route] }]))[r.model];
    expect(state.circuit).toEqual({ state: 'closed', failures: 0, openUntil: null });
  });

  it('a generator knows without Redis that a route it saw open is open, until its cooldown ends', async () => {
    const [a, b] = [generator(), generator()];
    const r = route();
    expect(a.circuit.seenOpen(r)).toBe(false);
    for (let i = 0; i < 3; i++) await a.circuit.record(r, settings, 'failure', false);
    expect(a.circuit.seenOpen(r)).toBe(true);
    // Another generator learns it with its next admission.
    expect(b.circuit.seenOpen(r)).toBe(false);
    expect((await b.circuit.admit(r, settings)).go).toBe(false);
    expect(b.circuit.seenOpen(r)).toBe(true);
    await sleep(1050);
    expect(a.circuit.seenOpen(r)).toBe(false);
  });

  it('routes are apart: one open route leaves another of the chain closed', async () => {
    const g = generator();
    const r = route();
    const second: CircuitRoute = { ...r, index: 1, route: { type: 'builtin' } };
    for (let i = 0; i < 3; i++) await g.circuit.record(r, settings, 'failure', false);
    expect((await g.circuit.admit(r, settings)).go).toBe(false);
    expect(await g.circuit.admit(second, settings)).toEqual({ go: true, probe: false });
  });

  it('when Redis does not answer, each generator keeps its own circuit by the same rules', async () => {
    const g = generator();
    const r = route();
    const client = g.redis.client as unknown as Record<'evalsha' | 'eval', (...args: unknown[]) => Promise<unknown>>;
    for (const name of ['evalsha', 'eval'] as const) client[name] = () => new Promise(() => undefined);
    expect(await g.circuit.admit(r, settings)).toEqual({ go: true, probe: false });
    for (let i = 0; i < 2; i++) expect(await g.circuit.record(r, settings, 'failure', false)).toBe('closed');
    expect(await g.circuit.record(r, settings, 'failure', false)).toBe('open');
    expect((await g.circuit.admit(r, settings)).go).toBe(false);
    await sleep(1050);
    expect(await g.circuit.admit(r, settings)).toEqual({ go: true, probe: true });
    expect((await g.circuit.admit(r, settings)).go).toBe(false);
    expect(await g.circuit.record(r, settings, 'ok', true)).toBe('closed');
    expect(await g.metrics.registry.getSingleMetricAsString('kiln_route_circuit_fallback_total')).toMatch(
      /kiln_route_circuit_fallback_total 1/,
    );
  });
});
