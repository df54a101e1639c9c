import { ProcessSampler, readProcStatus } from '../lib/children';
import { FAST_MODEL, prompts, waitAllDone } from '../lib/harness';
import { LoadFigures, runLoad } from '../lib/load';
import { BenchAccount, KilnStack } from '../lib/kiln';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round, sleep } from '../lib/util';

/** Issue 24: 50,000 economy tasks in upstream batches of 10,000 (scaled by KILN_BENCH_ECONOMY_TASKS). */
const TASKS = Number(process.env.KILN_BENCH_ECONOMY_TASKS ?? 50_000);
const PER_UPSTREAM_BATCH = 10_000;
/** 1,000 prompts x 10 copies: the most one create may carry. */
const PROMPTS_PER_BATCH = 1000;
const COPIES = 10;
const DELAY_MS = 5000;
const RSS_LIMIT_MB = 400;
const P99_RATIO_LIMIT = 1.1;
const LOAD_CONNECTIONS = 4;
const LOAD_SEC = 20;

/**
 * Issue 24's economy scenario: 50,000 economy tasks through the simulated route's local batch
 * API in upstream batches of 10,000, with the generator's RSS held under 400 MB while it
 * stores the results; and the api's p99 for standard creates while the economy work runs,
 * against the same load with no economy work (within 10 %).
 */
export async function economy(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  await stack.liftScalePlanLimits();
  await stack.admin('PATCH', '/plans/scale', { maxImagesPerBatch: PROMPTS_PER_BATCH * COPIES, maxConcurrentEconomyBatches: 1000 });
  const route = {
    type: 'simulated',
    latencyMs: 0,
    batch: { enabled: true, collectMs: 1000, maxRequests: PER_UPSTREAM_BATCH, pollIntervalMs: 1000, delayMs: DELAY_MS },
    cost: { '1K': 0.04, economy: { '1K': 0.02 } },
  };
  await stack.admin('PATCH', `/models/${FAST_MODEL}`, { provider: route, enabled: true, economyCreditCost: { '1K': 1 }, economyWindowHours: 24 });
  const gen = await stack.startGenerator({ GENERATOR_CONCURRENCY: '20', ECONOMY_TICK_MS: '500' });
  try {
    const standard = [await stack.createAccount('economy-standard'), await stack.createAccount('economy-standard'), await stack.createAccount('economy-standard'), await stack.createAccount('economy-standard')];
    // Warm-up: a small economy batch through the whole path, and a few seconds of standard creates.
    const warm = await stack.createAccount('economy-warmup');
    await stack.createBatch(warm, { model: FAST_MODEL, prompts: prompts(100, 'warm-up'), tier: 'economy' });
    await waitAllDone(stack, [warm], 5 * 60_000, 200);
    await standardLoad(stack, standard, 3);
    await waitAllDone(stack, standard, 5 * 60_000, 200);
    await sleep(2000);
    const idleRssMb = readProcStatus(gen.pid)?.rssMb ?? NaN;

    const account = await stack.createAccount('economy');
    const sampler = new ProcessSampler({ generator: gen.pid, api: stack.api!.pid }, 100).start();
    const t0 = Date.now();
    let withEconomy: LoadFigures;
    let end: number;
    try {
      for (let created = 0; created < TASKS; created += PROMPTS_PER_BATCH * COPIES) {
        const n = Math.min(PROMPTS_PER_BATCH * COPIES, TASKS - created);
        await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(Math.ceil(n / COPIES), `economy ${created}`), countPerCombo: COPIES, tier: 'economy' });
      }
      log(`economy: ${TASKS} economy tasks created in ${round((Date.now() - t0) / 1000, 1)} s; standard creates alongside (${LOAD_SEC} s)`);
      withEconomy = await standardLoad(stack, standard, LOAD_SEC);
      end = await waitAllDone(stack, [account], 30 * 60_000, 500);
      await waitAllDone(stack, standard, 5 * 60_000, 200);
    } catch (err) {
      sampler.stop();
      throw err;
    }
    const figures = sampler.stop();
    const wallSec = (end - t0) / 1000;
    // The baseline afterwards, on the same warmed-up processes, with no economy work left.
    log(`economy: standard creates alone (${LOAD_SEC} s, ${LOAD_CONNECTIONS} connections)`);
    const alone = await standardLoad(stack, standard, LOAD_SEC);
    await waitAllDone(stack, standard, 5 * 60_000, 200);
    const outcome = await stack.taskOutcomes([account.id]);
    const { rows: groups } = await stack.db.query<{ lines: number; state: string }>(
      `SELECT lines, state FROM upstream_batches WHERE id IN (SELECT DISTINCT upstream_batch_id FROM tasks WHERE account_id = $1)`,
      [account.id],
    );
    const peakMb = Math.max(figures.generator.peakRssMb, Number.isNaN(figures.generator.hwmMb) ? 0 : figures.generator.hwmMb);
    const ratio = round(withEconomy.p99Ms / Math.max(1, alone.p99Ms), 2);
    const rss: Figure = {
      metric: `generator peak RSS, ${TASKS} economy tasks`,
      unit: 'MB',
      kiln: round(peakMb, 0),
      baseline: round(idleRssMb, 0),
      baselineLabel: 'idle RSS',
      ratio: null,
      target: `< ${RSS_LIMIT_MB} MB`,
      targetOn: 'kiln',
      met: peakMb < RSS_LIMIT_MB,
    };
    const p99: Figure = {
      metric: 'api p99 of standard creates, with economy work running',
      unit: 'ms',
      kiln: withEconomy.p99Ms,
      baseline: alone.p99Ms,
      baselineLabel: 'the same load with no economy work',
      ratio,
      target: `<= ${P99_RATIO_LIMIT}`,
      targetOn: 'ratio',
      met: ratio <= P99_RATIO_LIMIT,
    };
    const wall: Figure = {
      metric: `wall time, ${TASKS} economy tasks (upstream batches take ${DELAY_MS / 1000} s)`,
      unit: 's',
      kiln: round(wallSec, 1),
      baseline: null,
      ratio: null,
      target: 'none (informative)',
      targetOn: 'kiln',
      met: true,
    };
    const notes: string[] = [];
    if (outcome.succeeded !== TASKS) notes.push(`${outcome.succeeded} of ${TASKS} economy tasks succeeded, ${outcome.failed} failed.`);
    if (TASKS !== 50_000) notes.push(`Scaled down to ${TASKS} tasks (KILN_BENCH_ECONOMY_TASKS).`);
    return {
      id: 'economy',
      title: `Economy tier: ${TASKS} tasks in upstream batches of ${PER_UPSTREAM_BATCH} on the simulated batch API`,
      method: [
        `${TASKS / (PROMPTS_PER_BATCH * COPIES)} economy batches of ${PROMPTS_PER_BATCH} prompts x ${COPIES} copies on a model routed to simulated with batch { collectMs 1000, maxRequests ${PER_UPSTREAM_BATCH}, pollIntervalMs 1000, delayMs ${DELAY_MS} }; one generator (GENERATOR_CONCURRENCY=20, ECONOMY_TICK_MS=500), warmed up with a 100-task economy batch.`,
        `RSS: the generator's peak (sampled every 100 ms, and VmHWM) from the first economy create until every economy task ended (the standard load below ran in that time, on the same generator). p99: autocannon POSTs of 4-prompt standard batches on ${LOAD_CONNECTIONS} connections (four accounts) for ${LOAD_SEC} s, once right after the economy batches were created (while they are gathered, uploaded, waited on and read), and once after every economy task ended (the baseline: no economy work).`,
      ],
      figures: [rss, p99, wall],
      notes,
      profiles: [],
      details: {
        tasks: TASKS,
        succeeded: outcome.succeeded,
        failed: outcome.failed,
        upstreamBatches: groups.map((g) => ({ lines: g.lines, state: g.state })),
        standardAlone: alone,
        standardWithEconomy: withEconomy,
        generator: { idleRssMb: round(idleRssMb, 0), peakRssMb: round(figures.generator.peakRssMb, 0), hwmMb: round(figures.generator.hwmMb, 0), cpuCores: round(figures.generator.cpuCores, 2) },
        api: { peakRssMb: round(figures.api.peakRssMb, 0), cpuCores: round(figures.api.cpuCores, 2) },
      },
    };
  } finally {
    await stack.stopGenerator();
  }
}

/** Standard creates of 4 prompts from several accounts for `sec` seconds. */
function standardLoad(stack: KilnStack, accounts: BenchAccount[], sec: number): Promise<LoadFigures> {
  const headers = (a: BenchAccount) => ({ authorization: `Bearer ${a.key}`, 'content-type': 'application/json' });
  return runLoad({
    url: `${stack.baseUrl}/v1/batches`,
    method: 'POST',
    body: JSON.stringify({ model: FAST_MODEL, prompts: prompts(4, 'standard') }),
    headers: headers(accounts[0]),
    headersPerConnection: accounts.map(headers),
    connections: LOAD_CONNECTIONS,
    durationSec: sec,
  });
}
