import { FAST_MODEL, median } from '../lib/harness';
import { BenchAccount, KilnStack } from '../lib/kiln';
import { BenchContext, ScenarioResult } from '../lib/types';
import { log, round } from '../lib/util';

const ROUNDS = 40;
const IMAGES = 2;
/** The door may add this much to a request over create + long poll done by hand. */
const TARGET = 1.25;

/**
 * The OpenAI-compatible door's overhead: the same small batch (IMAGES images on a 0 ms
 * simulated model) asked for ROUNDS times through POST /v1/images/generations and, as the
 * baseline, by hand: POST /v1/batches, then GET /v1/batches/{id} with Prefer: wait=30 and the
 * last ETag until done. Alternating, one request at a time; the median wall time of each.
 */
export async function openaiDoor(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const account = await stack.createAccount('openai-door');
  await stack.startGenerator();
  try {
    await direct(stack, account, 'warm-up');
    await door(stack, account, 'warm-up');
    const byHand: number[] = [];
    const viaDoor: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      byHand.push(await direct(stack, account, `round ${r}`));
      viaDoor.push(await door(stack, account, `round ${r}`));
    }
    const kiln = round(median(viaDoor), 1);
    const baseline = round(median(byHand), 1);
    const ratio = round(kiln / baseline, 2);
    log(`openai-door: door ${kiln} ms, create + long poll ${baseline} ms (x${ratio})`);
    return {
      id: 'openai-door',
      title: `OpenAI-compatible door: ${IMAGES} images through images.generate vs create + long poll`,
      method: [
        `${ROUNDS} alternating rounds, one request at a time, of a ${IMAGES}-image batch on a model routed to the simulated provider with latencyMs 0 and one generator; a warm-up of each first.`,
        'Door: POST /v1/images/generations { model, prompt, n } answered with the URLs once the batch is done. Baseline: POST /v1/batches, then GET /v1/batches/{id} with Prefer: wait=30 and If-None-Match until done.',
        'Median wall time of each (every round in the JSON).',
      ],
      figures: [
        {
          metric: 'request wall time',
          unit: 'ms',
          kiln,
          baseline,
          baselineLabel: 'create + long poll',
          ratio,
          target: `<= ${TARGET}`,
          targetOn: 'ratio',
          met: ratio <= TARGET,
        },
      ],
      notes: [],
      profiles: [],
      details: { viaDoor, byHand },
    };
  } finally {
    await stack.stopGenerator();
  }
}

async function door(stack: KilnStack, account: BenchAccount, tag: string): Promise<number> {
  const t0 = performance.now();
  const res = await stack.request<{ data: unknown[] }>('POST', '/v1/images/generations', account.key, {
    model: FAST_MODEL,
    prompt: `door ${tag}`,
    n: IMAGES,
  });
  if (res.status !== 200 || res.body.data.length !== IMAGES)
    throw new Error(`images/generations: ${res.status} ${JSON.stringify(res.body)}`);
  return performance.now() - t0;
}

async function direct(stack: KilnStack, account: BenchAccount, tag: string): Promise<number> {
  const t0 = performance.now();
  const { id } = await stack.createBatch(account, { model: FAST_MODEL, prompts: [`direct ${tag}`], countPerCombo: IMAGES });
  let etag: string | undefined;
  for (;;) {
    const res = await fetch(`${stack.baseUrl}/v1/batches/${id}`, {
      headers: { authorization: `Bearer ${account.key}`, prefer: 'wait=30', ...(etag && { 'if-none-match': etag }) },
    });
    etag = res.headers.get('etag') ?? etag;
    if (res.status === 200 && ((await res.json()) as { batch: { done: boolean } }).batch.done) break;
    if (res.status === 304) continue;
    if (res.status !== 200) throw new Error(`GET /v1/batches/${id}: ${res.status}`);
  }
  return performance.now() - t0;
}
