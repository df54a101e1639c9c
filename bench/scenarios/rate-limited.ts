import { SLOW_MODEL, waitAllDone } from '../lib/harness';
import { RateLimitedUpstream } from '../lib/rate-limited-upstream';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { startUpstreamRun } from '../lib/upstream-run';
import { log, round } from '../lib/util';

/** The upstream's limits (issue 26): 20 requests a second, 40 at once, 1 s each, 429 beyond. */
const PER_SECOND = 20;
const AT_ONCE = 40;
const LATENCY_MS = 1000;
const MAX_CONCURRENCY = 200;
/** 2,000 by default; KILN_BENCH_RATE_IMAGES scales it down on a busy machine (the ratio to the ideal stays comparable). */
const IMAGES = Number(process.env.KILN_BENCH_RATE_IMAGES ?? 2000);
/** The 429 timeline's step in the log: 5 s by default; KILN_BENCH_RATE_BUCKET_MS for a finer look at the slow start. */
const REFUSAL_BUCKET_MS = Number(process.env.KILN_BENCH_RATE_BUCKET_MS ?? 5000);
const PER_BATCH = 100;
const GENERATORS = 2;
const WALL_TARGET = 1.1;
const REFUSED_TARGET_PCT = 3;
const IDEAL_SEC = IMAGES / PER_SECOND + LATENCY_MS / 1000;

/**
 * Issue 26's rate-limited scenario: a fake OpenAI upstream on 127.0.0.1 that allows 20
 * requests a second and 40 at once, with and without OpenAI's rate-limit headers; two
 * generators share the route (maxConcurrency 200) through the route pacing. The upstream runs
 * in a child process: in the bench's own, a stall of the bench delayed its count by a rate
 * window and showed as 429s. The route pacing spec's `sentAt` does not serve here: the prompts
 * are written at the batch's creation, and a generator stamps nothing on its calls.
 */
export async function rateLimited(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const figures: Figure[] = [];
  const details: Record<string, unknown> = { idealSec: IDEAL_SEC, images: IMAGES };
  try {
    const { accounts, postBatches } = await startUpstreamRun(stack, 'rate-limited', GENERATORS);
    for (const openAiHeaders of [true, false]) {
      const label = openAiHeaders ? 'OpenAI headers' : '429s alone';
      const upstream = await RateLimitedUpstream.start(stack, `rate-limited-upstream-${openAiHeaders ? 'headers' : 'plain'}`, {
        perSecond: PER_SECOND,
        maxConcurrent: AT_ONCE,
        latencyMs: LATENCY_MS,
        openAiHeaders,
      });
      try {
        // A new upstream model id each variant, so no pacing state carries over between them.
        await stack.routeModel(SLOW_MODEL, {
          type: 'openai',
          baseUrl: upstream.baseUrl,
          model: `bench-${openAiHeaders ? 'headers' : 'plain'}`,
          maxConcurrency: MAX_CONCURRENCY,
        });
        const before = await stack.taskOutcomes(accounts.map((a) => a.id));
        const t0 = Date.now();
        await postBatches(SLOW_MODEL, IMAGES, PER_BATCH, `rate ${label}`);
        const end = await waitAllDone(stack, accounts, Math.max(600_000, IDEAL_SEC * 5000), 100);
        const wall = round((end - t0) / 1000, 2);
        const after = await stack.taskOutcomes(accounts.map((a) => a.id));
        const failed = after.failed - before.failed;
        const fake = await upstream.stats();
        const refused = fake.refusedAt.length;
        const calls = fake.accepted + refused;
        const refusedPct = round(fake.refusedShare * 100, 2);
        log(
          `rate-limited (${label}): 429s by ${REFUSAL_BUCKET_MS / 1000} s from the first POST: ${refusalTimeline(fake.refusedAt, t0, REFUSAL_BUCKET_MS)}`,
        );
        log(
          `rate-limited (${label}): ${wall} s (ideal ${IDEAL_SEC} s), ${refused} 429s of ${calls} calls, ${failed} failed, at most ${fake.maxInFlight} in flight`,
        );
        const ratio = round(wall / IDEAL_SEC, 2);
        figures.push(
          {
            metric: `wall time, ${label}`,
            unit: 's',
            kiln: wall,
            baseline: IDEAL_SEC,
            baselineLabel: 'ideal',
            ratio,
            target: `<= ${WALL_TARGET}`,
            targetOn: 'ratio',
            met: ratio <= WALL_TARGET,
          },
          {
            metric: `429 share, ${label}`,
            unit: '% of upstream calls',
            kiln: refusedPct,
            baseline: null,
            ratio: null,
            target: `<= ${REFUSED_TARGET_PCT} %`,
            targetOn: 'kiln',
            met: refusedPct <= REFUSED_TARGET_PCT,
          },
          {
            metric: `tasks failed, ${label}`,
            unit: 'tasks',
            kiln: failed,
            baseline: null,
            ratio: null,
            target: '= 0',
            targetOn: 'kiln',
            met: failed === 0,
          },
        );
        details[label] = { wall, accepted: fake.accepted, refused, maxInFlight: fake.maxInFlight, failed };
      } finally {
        await upstream.stop();
      }
    }
  } finally {
    await stack.stopGenerator();
  }
  return {
    id: 'rate-limited',
    title: `Rate-limited upstream: ${IMAGES.toLocaleString('en-US')} images, ${PER_SECOND} requests/s and ${AT_ONCE} at once allowed, ${LATENCY_MS / 1000} s latency, ${GENERATORS} generators`,
    method: [
      `A fake OpenAI images endpoint on 127.0.0.1 (RateLimitedOpenAiFake, in a process of its own so the bench's work cannot delay its count) accepts ${PER_SECOND} requests per one-second window and ${AT_ONCE} at once, answers each after ${LATENCY_MS} ms, and 429 at once beyond; once with OpenAI's x-ratelimit-*-requests headers on every answer, once with bare 429s (as Gemini).`,
      `The model is routed to it (openai type, maxConcurrency ${MAX_CONCURRENCY}); ${GENERATORS} generators with GENERATOR_CONCURRENCY=100 share the route's pacing through Redis. ${IMAGES / PER_BATCH} batches of ${PER_BATCH} images are POSTed at once over two accounts.`,
      `Wall time from the first POST until every batch is finished, against the ideal ${IMAGES} / ${PER_SECOND} s plus one latency = ${IDEAL_SEC} s; the 429 share is the fake's refused calls over all calls; a task failed for rate limits would show in "tasks failed".`,
    ],
    figures,
    notes: [],
    profiles: [],
    details,
  };
}

/** Refusals counted per `bucketMs` from `t0`, as "0-5 s: 12, 5-10 s: 3, ..." (empty buckets left out). */
function refusalTimeline(refusedAt: readonly number[], t0: number, bucketMs: number): string {
  const counts = new Map<number, number>();
  for (const at of refusedAt) {
    const bucket = Math.floor((at - t0) / bucketMs);
    counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
  }
  const sec = (ms: number): number => ms / 1000;
  return (
    [...counts]
      .sort(([a], [b]) => a - b)
      .map(([b, n]) => `${sec(b * bucketMs)}-${sec((b + 1) * bucketMs)} s: ${n}`)
      .join(', ') || 'none'
  );
}
