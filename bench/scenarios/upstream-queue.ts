// The fakes alone, not @app/testing's whole index (its e2e harness has no business in the bench's process).
import { FakeQueueUpstream, fakeQueueUpstream } from '../../libs/testing/src/fakes';
import { ProcessSampler, readProcStatus } from '../lib/children';
import { FAST_MODEL, prompts, waitAllDone } from '../lib/harness';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round, sleep } from '../lib/util';

const TASKS = 2000;
/** The scale plan's most images per batch. */
const PER_BATCH = 100;
const QUEUE_MS = 10_000;
const POLL_INTERVAL_MS = 1000;
/** The route's cap: concurrent submits and downloads of the model. */
const ROUTE_CAP = 50;
const GENERATOR_CONCURRENCY = 50;
const RSS_GROWTH_LIMIT_MB = 150;
const WALL_RATIO_LIMIT = 1.2;

/**
 * Issue 23: 2,000 tasks on a fake fal queue that keeps each request 10 s, one generator with
 * GENERATOR_CONCURRENCY=50. A task waiting upstream must hold no worker: were the workers
 * held, 2,000 / 50 waves of 10 s would take 400 s instead of about 10.
 */
export async function upstreamQueue(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const fake = fakeQueueUpstream('fal', { queueMs: QUEUE_MS, imageSize: { width: 64, height: 64 } });
  fake.recordBodies = false;
  await fake.start();
  try {
    // The ideal, measured in this run: the same submits and image downloads from a plain
    // client at the route's cap, plus the 10 s every request spends in the queue.
    const rawQueue = fakeQueueUpstream('fal', { queueMs: 0, imageSize: { width: 64, height: 64 } });
    rawQueue.recordBodies = false;
    await rawQueue.start();
    let rawSec: number;
    try {
      rawSec = await rawSubmitAndDownload(rawQueue, TASKS, ROUTE_CAP);
    } finally {
      await rawQueue.stop();
    }
    const idealSec = QUEUE_MS / 1000 + rawSec;
    log(
      `upstream-queue: plain client, ${TASKS} submits + downloads at ${ROUTE_CAP} at once: ${round(rawSec, 2)} s; ideal ${round(idealSec, 2)} s`,
    );

    await stack.liftScalePlanLimits();
    const route = (baseUrl: string) => ({
      type: 'fal',
      baseUrl,
      model: 'fal-ai/flux/schnell',
      pollIntervalMs: POLL_INTERVAL_MS,
      maxConcurrency: ROUTE_CAP,
    });
    const gen = await stack.startGenerator({ GENERATOR_CONCURRENCY: String(GENERATOR_CONCURRENCY) });
    // Warm-up, as every bench generator gets: one batch through a quick fake of its own, so
    // the idle figure is a generator that has run the code paths once, not one just booted.
    const warmFake = fakeQueueUpstream('fal', { queueMs: 500, imageSize: { width: 64, height: 64 } });
    warmFake.recordBodies = false;
    await warmFake.start();
    try {
      await stack.routeModel(FAST_MODEL, route(warmFake.baseUrl));
      const warm = await stack.createAccount('upstream-queue-warmup');
      await stack.createBatch(warm, { model: FAST_MODEL, prompts: prompts(PER_BATCH, 'warm-up') });
      await waitAllDone(stack, [warm], 5 * 60_000, 100);
    } finally {
      await warmFake.stop();
    }
    await stack.routeModel(FAST_MODEL, route(fake.baseUrl));
    const account = await stack.createAccount('upstream-queue');
    await sleep(2000);
    const idleRssMb = readProcStatus(gen.pid)?.rssMb ?? NaN;
    const sampler = new ProcessSampler({ generator: gen.pid }, 100).start();
    const t0 = Date.now();
    let end: number;
    try {
      for (let b = 0; b < TASKS / PER_BATCH; b++) {
        await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(PER_BATCH, `queue ${b}`) });
      }
      end = await waitAllDone(stack, [account], 10 * 60_000, 100);
    } catch (err) {
      sampler.stop();
      await stack.stopGenerator();
      throw err;
    }
    const figures = sampler.stop().generator;
    await stack.stopGenerator();
    const wallSec = (end - t0) / 1000;
    const outcome = await stack.taskOutcomes([account.id]);
    const polling = fake.pollingStats(POLL_INTERVAL_MS);
    const growthMb = Math.max(figures.peakRssMb, Number.isNaN(figures.hwmMb) ? 0 : figures.hwmMb) - idleRssMb;

    const wall: Figure = {
      metric: `wall time, ${TASKS} tasks 10 s in queue`,
      unit: 's',
      kiln: round(wallSec, 2),
      baseline: round(idealSec, 2),
      baselineLabel: 'ideal: 10 s + plain-client submits and downloads at the cap',
      ratio: round(wallSec / idealSec, 2),
      target: `<= ${WALL_RATIO_LIMIT}`,
      targetOn: 'ratio',
      met: wallSec / idealSec <= WALL_RATIO_LIMIT,
    };
    const rss: Figure = {
      metric: 'generator RSS growth (peak - idle)',
      unit: 'MB',
      kiln: round(growthMb, 0),
      baseline: round(idleRssMb, 0),
      baselineLabel: 'idle RSS',
      ratio: null,
      target: `< ${RSS_GROWTH_LIMIT_MB} MB`,
      targetOn: 'kiln',
      met: growthMb < RSS_GROWTH_LIMIT_MB,
    };
    const polls: Figure = {
      metric: 'status polls per task per poll interval',
      unit: 'polls',
      kiln: round(polling.pollsPerInterval, 2),
      baseline: null,
      ratio: null,
      target: '<= 1',
      targetOn: 'kiln',
      met: polling.pollsPerInterval <= 1,
    };
    const notes: string[] = [];
    if (outcome.succeeded !== TASKS) notes.push(`${outcome.succeeded} of ${TASKS} tasks succeeded, ${outcome.failed} failed.`);
    if (fake.submits !== TASKS) notes.push(`The fake upstream saw ${fake.submits} submits for ${TASKS} tasks.`);
    return {
      id: 'upstream-queue',
      title: 'Queue upstream: 2,000 tasks waiting 10 s each on one generator',
      method: [
        `A fake fal queue on 127.0.0.1 keeps every request ${QUEUE_MS / 1000} s in queue and answers 64x64 PNGs; the route polls every ${POLL_INTERVAL_MS} ms with maxConcurrency ${ROUTE_CAP}; one generator with GENERATOR_CONCURRENCY=${GENERATOR_CONCURRENCY}; ${TASKS / PER_BATCH} batches of ${PER_BATCH} created back to back.`,
        `Ideal: ${QUEUE_MS / 1000} s plus the time a plain client in the bench process takes for ${TASKS} submits and ${TASKS} image downloads at ${ROUTE_CAP} at once against the same fake (measured in this run: ${round(rawSec, 2)} s).`,
        "RSS growth: the generator's peak RSS (sampled every 100 ms, and VmHWM) minus its RSS when idle after a warm-up batch of 100 tasks through a quick fake of its own. Polls per interval: status checks the fake counted per request, over the time from its submit to its last poll.",
      ],
      figures: [wall, rss, polls],
      notes,
      profiles: [],
      details: {
        tasks: TASKS,
        succeeded: outcome.succeeded,
        failed: outcome.failed,
        submits: fake.submits,
        statusPolls: polling.polls,
        shortestGapBetweenPollsMs: polling.minGapMs,
        rawSubmitAndDownloadSec: round(rawSec, 2),
        generator: {
          idleRssMb: round(idleRssMb, 0),
          peakRssMb: round(figures.peakRssMb, 0),
          hwmMb: round(figures.hwmMb, 0),
          cpuCores: round(figures.cpuCores, 2),
        },
      },
    };
  } finally {
    await fake.stop();
  }
}

/** Submits n requests, then downloads their images, `concurrency` at once; answers seconds. */
async function rawSubmitAndDownload(fake: FakeQueueUpstream, n: number, concurrency: number): Promise<number> {
  const t0 = Date.now();
  const imageUrls: string[] = [];
  await pool(n, concurrency, async (i) => {
    const submit = await fetch(`${fake.baseUrl}/fal-ai/flux/schnell`, {
      method: 'POST',
      headers: { authorization: 'Key bench', 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: `raw ${i}`, seed: i, image_size: { width: 64, height: 64 } }),
    });
    const { response_url } = (await submit.json()) as { response_url: string };
    const result = (await (await fetch(response_url, { headers: { authorization: 'Key bench' } })).json()) as { images: { url: string }[] };
    imageUrls[i] = result.images[0].url;
  });
  await pool(n, concurrency, async (i) => {
    await (await fetch(imageUrls[i])).arrayBuffer();
  });
  return (Date.now() - t0) / 1000;
}

async function pool(n: number, concurrency: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await work(next++);
    }),
  );
}
