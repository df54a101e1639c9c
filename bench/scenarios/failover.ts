import { SLOW_MODEL, waitAllDone } from '../lib/harness';
import Redis from 'ioredis';
import { RateLimitedUpstream } from '../lib/rate-limited-upstream';
import type { BenchAccount } from '../lib/kiln';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { startUpstreamRun } from '../lib/upstream-run';
import { log, round } from '../lib/util';

/** 2,000 by default; KILN_BENCH_FAILOVER_IMAGES scales it down (the ratio to the ideal stays comparable). */
const IMAGES = Number(process.env.KILN_BENCH_FAILOVER_IMAGES ?? 2000);
/** Each route: this many calls at once, each answered after LATENCY_MS. */
const AT_ONCE = 100;
const LATENCY_MS = 1000;
const PER_BATCH = 100;
const GENERATORS = 2;
/** The primary answers 503 from when this share of the images is done. */
const OUTAGE_AT = 0.3;
const COOLDOWN_MS = 10_000;
const FAILURES_TO_OPEN = 5;
const WALL_TARGET = 1.2;
/** On the fallback alone, as arithmetic: every image at AT_ONCE at a time (a diagnostic; the target is against the measured run). */
const IDEAL_SEC = (Math.ceil(IMAGES / AT_ONCE) * LATENCY_MS) / 1000;

/**
 * Issue 42's failover scenario: a model on a chain of two routes, two fake OpenAI upstreams on
 * 127.0.0.1 (each in a process of its own, as the rate-limited scenario's), the same capacity
 * each; from 30 % of the run the primary answers every call 503. Every task must still
 * succeed, the run take little longer than it would on the fallback alone, and the dead route
 * get no more than its circuit's probes once the circuit opened. "On the fallback alone" is
 * measured first in the same run: the same images through Kiln on one route of its own (a
 * fresh upstream of the same capacity), which pays what any route pays once (the pacer's slow
 * start on an upstream it does not know), so the ratio is what the outage costs.
 */
export async function failover(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const limits = { perSecond: 1_000_000, maxConcurrent: 10_000, latencyMs: LATENCY_MS, openAiHeaders: false };
  const primary = await RateLimitedUpstream.start(stack, 'failover-primary', limits);
  const fallback = await RateLimitedUpstream.start(stack, 'failover-fallback', limits);
  const figures: Figure[] = [];
  const details: Record<string, unknown> = {};
  try {
    const { accounts, postBatches } = await startUpstreamRun(stack, 'failover', GENERATORS);
    const route = (baseUrl: string, model: string) => ({ type: 'openai', baseUrl, model, maxConcurrency: AT_ONCE });
    const soloWall = await onOneRoute(stack, accounts, postBatches, route, limits);
    log(`failover: on one route alone ${soloWall} s (arithmetic ideal ${IDEAL_SEC} s)`);
    await stack.admin('PATCH', `/models/${SLOW_MODEL}`, {
      routes: [route(primary.baseUrl, 'bench-primary'), route(fallback.baseUrl, 'bench-fallback')],
      failover: { cooldownMs: COOLDOWN_MS, failuresToOpen: FAILURES_TO_OPEN },
      enabled: true,
    });
    const before = await stack.taskOutcomes(accounts.map((a) => a.id));
    const t0 = Date.now();
    await postBatches(SLOW_MODEL, IMAGES, PER_BATCH, 'failover');
    // The outage starts when 30 % of the images are made (through the primary, as long as it is up).
    let outageAt = 0;
    while (!outageAt) {
      const now = await stack.taskOutcomes(accounts.map((a) => a.id));
      if (now.succeeded - before.succeeded >= IMAGES * OUTAGE_AT) {
        primary.setOutage('down');
        outageAt = Date.now();
      } else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    log(`failover: the primary answers 503 from ${round((outageAt - t0) / 1000, 2)} s`);
    const circuit = watchCircuitOpen(stack, SLOW_MODEL);
    const end = await waitAllDone(stack, accounts, Math.max(600_000, IDEAL_SEC * 10_000), 100).finally(() => circuit.stop());
    const wall = round((end - t0) / 1000, 2);
    const after = await stack.taskOutcomes(accounts.map((a) => a.id));
    const failed = after.failed - before.failed;
    const dead = await primary.stats();
    const alive = await fallback.stats();
    // When the circuit opened, as Redis shows it (polled): not the FAILURES_TO_OPEN-th 503, since
    // the successes of the calls in flight at the outage, coming back for up to a latency
    // after it, each start the count in a row again. Calls that arrived later went there past
    // it: probes. Before the first poll that saw it open, the FAILURES_TO_OPEN-th 503 as the
    // earliest it could have opened.
    const opened = circuit.openedAt ?? dead.downAt[FAILURES_TO_OPEN - 1] ?? Infinity;
    const afterOpen = dead.downAt.filter((at) => at > opened + 100).length;
    const openSec = Math.max(0, (end - Math.min(opened, end)) / 1000);
    const allowedProbes = Math.ceil(openSec / (COOLDOWN_MS / 1000)) * GENERATORS;
    const ratio = round(wall / soloWall, 2);
    log(
      `failover: ${wall} s (on the fallback alone ${soloWall} s, arithmetic ideal ${IDEAL_SEC} s), ${failed} failed; primary ${dead.accepted} made, ${dead.downAt.length} answered 503 (${afterOpen} after its circuit opened ${round((opened - outageAt) / 1000, 2)} s into the outage, over ${round(openSec, 1)} s); fallback ${alive.accepted} made`,
    );
    figures.push(
      {
        metric: 'wall time, primary down from 30 %',
        unit: 's',
        kiln: wall,
        baseline: soloWall,
        baselineLabel: 'Kiln on the fallback alone, same run',
        ratio,
        target: `<= ${WALL_TARGET}`,
        targetOn: 'ratio',
        met: ratio <= WALL_TARGET,
      },
      {
        metric: 'wall time against the arithmetic ideal (diagnostic)',
        unit: 's',
        kiln: wall,
        baseline: IDEAL_SEC,
        baselineLabel: `ideal: ${IMAGES} images ${AT_ONCE} at a time`,
        ratio: round(wall / IDEAL_SEC, 2),
      },
      {
        metric: 'tasks failed',
        unit: 'tasks',
        kiln: failed,
        baseline: null,
        ratio: null,
        target: '= 0',
        targetOn: 'kiln',
        met: failed === 0,
      },
      {
        metric: 'calls to the dead route after its circuit opened',
        unit: 'calls',
        kiln: afterOpen,
        baseline: null,
        ratio: null,
        target: `<= ${allowedProbes} (1 probe per cooldown per generator)`,
        targetOn: 'kiln',
        met: afterOpen <= allowedProbes,
      },
    );
    Object.assign(details, {
      idealSec: IDEAL_SEC,
      soloWall,
      images: IMAGES,
      wall,
      failed,
      outageAtSec: round((outageAt - t0) / 1000, 2),
      primaryMade: dead.accepted,
      primary503: dead.downAt.length,
      afterOpen,
      circuitOpenedSec: round((opened - t0) / 1000, 2),
      fallbackMade: alive.accepted,
    });
  } finally {
    await stack.stopGenerator();
    await primary.stop();
    await fallback.stop();
  }
  return {
    id: 'failover',
    title: `Failover: ${IMAGES.toLocaleString('en-US')} images through two routes, the primary answering 503 from ${OUTAGE_AT * 100} % into the run, ${GENERATORS} generators`,
    method: [
      `Two fake OpenAI images endpoints on 127.0.0.1, each in a process of its own, each taking ${AT_ONCE} calls at once and answering after ${LATENCY_MS} ms; the model rides on [primary, fallback] (openai type, maxConcurrency ${AT_ONCE} each; failover cooldownMs ${COOLDOWN_MS}, failuresToOpen ${FAILURES_TO_OPEN}).`,
      `${Math.ceil(IMAGES / PER_BATCH)} batches of up to ${PER_BATCH} images are POSTed at once over two accounts; when ${OUTAGE_AT * 100} % of the images are made, the primary answers every call 503.`,
      `First, in the same run, the same batches on one route alone (a third fake upstream of the same capacity, fresh to the pacer): its wall time is the baseline.`,
      `Wall time from the first POST until every batch is finished, against that baseline (and, as a diagnostic, the arithmetic ideal: ${IMAGES} images ${AT_ONCE} at a time, ${LATENCY_MS} ms each = ${IDEAL_SEC} s); calls to the dead route are counted from when its circuit opened (Redis polled every ${CIRCUIT_POLL_MS} ms) on.`,
    ],
    figures,
    notes: [
      `The arithmetic ideal counts every round at ${AT_ONCE} calls. Kiln's pacing starts a route it has not used for 10 minutes at 8 calls in flight and doubles each clean round (docs/providers.md, Pacing: an upstream's limit is unknown): the run on one route pays that once, the failover run twice (the primary at the start, the fallback at the outage; 8 + 16 + 32 + 64 calls in a cold route's first 4 rounds instead of ${4 * AT_ONCE}), about 2.8 rounds (${round((2.8 * LATENCY_MS) / 1000, 1)} s) each.`,
    ],
    profiles: [],
    details,
  };
}

const CIRCUIT_POLL_MS = 25;

/** The baseline: the same images through Kiln on one route alone (a fresh upstream of the same capacity); its wall time in s. */
async function onOneRoute(
  stack: BenchContext['stack'],
  accounts: BenchAccount[],
  postBatches: (model: string, images: number, perBatch: number, tag: string) => Promise<void>,
  route: (baseUrl: string, model: string) => Record<string, unknown>,
  limits: Parameters<typeof RateLimitedUpstream.start>[2],
): Promise<number> {
  const solo = await RateLimitedUpstream.start(stack, 'failover-solo', limits);
  try {
    await stack.admin('PATCH', `/models/${SLOW_MODEL}`, { routes: [route(solo.baseUrl, 'bench-solo')], enabled: true });
    const t0 = Date.now();
    await postBatches(SLOW_MODEL, IMAGES, PER_BATCH, 'failover-solo');
    const end = await waitAllDone(stack, accounts, Math.max(600_000, IDEAL_SEC * 10_000), 100);
    return round((end - t0) / 1000, 2);
  } finally {
    await solo.stop();
  }
}

/** Polls the model's route circuits in Redis from now on: when one was first seen open (Date.now()). */
function watchCircuitOpen(stack: BenchContext['stack'], model: string): { openedAt: number | null; stop: () => void } {
  const redis = new Redis(stack.opts.redisUrl, { maxRetriesPerRequest: 2 });
  const pattern = `${stack.redisPrefix}:route-circuit:${model}:*`;
  const watch = { openedAt: null as number | null, stop: () => undefined as void };
  let stopped = false;
  const poll = async (): Promise<void> => {
    while (!stopped && watch.openedAt === null) {
      const keys = await redis.keys(pattern);
      const states = await Promise.all(keys.map((k) => redis.hget(k, 'state')));
      if (states.includes('open')) watch.openedAt = Date.now();
      else await new Promise((resolve) => setTimeout(resolve, CIRCUIT_POLL_MS));
    }
  };
  const polling = poll().catch((err: Error) => log(`failover: could not watch the circuit: ${err.message}`));
  watch.stop = () => {
    stopped = true;
    void polling.finally(() => redis.disconnect());
  };
  return watch;
}
