import {
  FAST_MODEL,
  measureWindow,
  median,
  profiled,
  prompts,
  shouldProfile,
  SLOW_MODEL,
  waitAllDone,
  WindowFigures,
} from '../lib/harness';
import { BenchAccount, KilnStack } from '../lib/kiln';
import { BenchContext, ScenarioResult } from '../lib/types';
import { log, round } from '../lib/util';

const IMAGES = 200;
const IN_FLIGHT = 100;
const LATENCY_MS = 1000;
const RUNS = 3;
/** Issue 26: hold it at 1.10 of the ideal. */
const TARGET = 1.1;
const IDEAL_SEC = (IMAGES / IN_FLIGHT) * (LATENCY_MS / 1000);

/** Scenario 4: 200 images from a 1 s simulated model with 100 tasks in flight, against the ideal 2 s. */
export async function latencyBound(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  await stack.routeModel(SLOW_MODEL, { type: 'simulated', latencyMs: LATENCY_MS });
  const accounts = [await stack.createAccount('latency'), await stack.createAccount('latency')];
  const env = { GENERATOR_CONCURRENCY: String(IN_FLIGHT), MODEL_CONCURRENCY_CAP: String(IN_FLIGHT) };
  await stack.startGenerator(env);
  try {
    log('latency: warm-up batch (0 ms model)');
    await stack.createBatch(accounts[0], { model: FAST_MODEL, prompts: prompts(IN_FLIGHT, 'warm-up') });
    await waitAllDone(stack, accounts, 120_000);
    // A route nothing is known of starts its pacing window at 8 calls and doubles it each
    // round of clean answers (docs/providers.md, Pacing): the first run on the 1 s model has
    // 8, 16, 32, 64 calls in flight, not 100. It is the route's warm-up, reported on its own;
    // the measured runs have the window at 100, which is what the scenario is about.
    const coldStartSec = await oneRun(stack, accounts);
    log(`latency: first run on the fresh route (pacing's slow start, not counted): ${coldStartSec} s`);

    const walls: number[] = [];
    const windows: WindowFigures[] = [];
    for (let r = 1; r <= RUNS; r++) {
      const measured = await measureWindow(stack, { api: stack.api!.pid, generator: stack.generator!.pid });
      walls.push(await oneRun(stack, accounts));
      windows.push(await measured());
      log(`latency: run ${r}/${RUNS}: ${walls[walls.length - 1]} s (ideal ${IDEAL_SEC} s)`);
    }
    const wall = median(walls);
    const ratio = round(wall / IDEAL_SEC, 2);

    let profiles: ScenarioResult['profiles'] = [];
    if (shouldProfile(ctx, ratio > TARGET)) {
      log('latency: profiled run of the generator (not counted)');
      profiles = (await profiled(ctx, [stack.generator!], () => oneRun(stack, accounts))).profiles;
    }
    return {
      id: 'latency',
      title: `Latency-bound: ${IMAGES} images, ${LATENCY_MS / 1000} s simulated latency, ${IN_FLIGHT} tasks in flight`,
      method: [
        `Two batches of ${IMAGES / 2} images (two accounts) POSTed at once on a model routed to the simulated provider with latencyMs ${LATENCY_MS}; one generator with GENERATOR_CONCURRENCY=${IN_FLIGHT} and MODEL_CONCURRENCY_CAP=${IN_FLIGHT}, warmed up with a 0 ms batch.`,
        `Wall time from the first POST until both batches are finished (batches.finished_at polled every 20 ms, then no task left unfinished checked); median of ${RUNS} runs (all in the JSON). Ideal: ${IMAGES} / ${IN_FLIGHT} x ${LATENCY_MS / 1000} s = ${IDEAL_SEC} s.`,
        `Before them, one unmeasured run of the same shape warms the 1 s route's pacing window (it starts at 8 calls in flight and doubles each round of clean answers); its wall time is reported as its own row. Until 2026-11-27 that run was the first of the three, so the median was the slower of the two others.`,
      ],
      figures: [
        {
          metric: 'wall time',
          unit: 's',
          kiln: wall,
          baseline: IDEAL_SEC,
          baselineLabel: 'ideal',
          ratio,
          target: `<= ${TARGET}`,
          targetOn: 'ratio',
          met: ratio <= TARGET,
        },
        {
          metric: "wall time of the first run on a fresh route (pacing's slow start, diagnostic)",
          unit: 's',
          kiln: coldStartSec,
          baseline: IDEAL_SEC,
          baselineLabel: 'ideal',
          ratio: round(coldStartSec / IDEAL_SEC, 2),
        },
      ],
      notes: [],
      profiles,
      details: { walls, coldStartSec, idealSec: IDEAL_SEC, windows },
    };
  } finally {
    await stack.stopGenerator();
  }
}

async function oneRun(stack: KilnStack, accounts: BenchAccount[]): Promise<number> {
  const t0 = Date.now();
  await Promise.all(
    accounts.map((a) => stack.createBatch(a, { model: SLOW_MODEL, prompts: prompts(IMAGES / accounts.length, 'latency') })),
  );
  const end = await waitAllDone(stack, accounts, 120_000, 20);
  return round((end - t0) / 1000, 2);
}
