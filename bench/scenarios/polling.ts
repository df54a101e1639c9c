import { isDeepStrictEqual } from 'node:util';
import {
  cpuPerUnit,
  FAST_MODEL,
  measureWindow,
  profiled,
  prompts,
  shouldProfile,
  startBaselineServer,
  WindowFigures,
  waitAllDone,
} from '../lib/harness';
import { LoadFigures, runLoad } from '../lib/load';
import { BenchContext, latency, ScenarioResult, throughput } from '../lib/types';
import { log } from '../lib/util';

const CONNECTIONS = 50;
const WARMUP_SEC = 2;
const TARGET = 0.5;

/** Scenario 1: GET /v1/batches/{id} of a finished 100-task batch, against bare node:http + pg. */
export async function polling(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack, opts } = ctx;
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const account = await stack.createAccount('polling');

  // The batch is made the real way: created through the API and rendered by the generator.
  await stack.startGenerator();
  const batch = await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(100, 'polling') });
  await waitAllDone(stack, [account], 120_000);
  await stack.stopGenerator();

  const path = `/v1/batches/${batch.id}`;
  const kilnBody = await stack.request<DetailBody>('GET', path, account.key);
  if (kilnBody.status !== 200 || !kilnBody.body.batch.done || kilnBody.body.batch.counts.succeeded !== 100) {
    throw new Error(`the polling batch is not a finished 100-task batch: ${JSON.stringify(kilnBody.body.batch)}`);
  }

  const base = await startBaselineServer(ctx, 'polling-server', { DATABASE_URL: stack.databaseUrl });
  const full = await startBaselineServer(
    ctx,
    'polling-server-full-rows',
    { DATABASE_URL: stack.databaseUrl, FULL_ROWS: '1' },
    'polling-server',
  );
  const notes: string[] = [];
  try {
    const baseUrl = `http://127.0.0.1:${base.port}${path}`;
    const fullUrl = `http://127.0.0.1:${full.port}${path}`;
    const kilnUrl = `${stack.baseUrl}${path}`;
    const headers = { authorization: `Bearer ${account.key}` };
    const baseBody = (await (await fetch(baseUrl, { headers })).json()) as DetailBody;
    const sameJson = isDeepStrictEqual(baseBody, kilnBody.body);
    if (!sameJson) notes.push("The baseline JSON differs from Kiln's (see details.jsonDiff); the comparison is still reported.");

    const run = (url: string, durationSec: number) => runLoad({ url, headers, connections: CONNECTIONS, durationSec });
    log(`polling: warm-up (${WARMUP_SEC} s each)`);
    await run(baseUrl, WARMUP_SEC);
    await run(fullUrl, WARMUP_SEC);
    await run(kilnUrl, WARMUP_SEC);

    const rounds: {
      baseline: LoadFigures;
      fullRows: LoadFigures;
      kiln: LoadFigures;
      baselineWindow: WindowFigures;
      kilnWindow: WindowFigures;
    }[] = [];
    for (let r = 1; r <= opts.rounds; r++) {
      log(`polling: round ${r}/${opts.rounds}: baseline, full-rows diagnostic, then Kiln, ${opts.pollingDurationSec} s each`);
      const bw = await measureWindow(stack, { baseline: base.child.pid });
      const baseline = await run(baseUrl, opts.pollingDurationSec);
      const baselineWindow = await bw();
      const fullRows = await run(fullUrl, opts.pollingDurationSec);
      const kw = await measureWindow(stack, { api: stack.api!.pid });
      const kiln = await run(kilnUrl, opts.pollingDurationSec);
      const kilnWindow = await kw();
      rounds.push({ baseline, fullRows, kiln, baselineWindow, kilnWindow });
    }
    const bestRound = (side: 'baseline' | 'kiln' | 'fullRows') => [...rounds].sort((a, b) => b[side].reqPerSec - a[side].reqPerSec)[0];
    const best = (side: 'baseline' | 'kiln' | 'fullRows') => bestRound(side)[side];
    const kiln = best('kiln');
    const baseline = best('baseline');
    notes.push(
      `CPU ms per request (best rounds): ${cpuPerUnit('Kiln:', bestRound('kiln').kilnWindow, kiln.reqPerSec)}; ${cpuPerUnit('baseline:', bestRound('baseline').baselineWindow, baseline.reqPerSec)}.`,
    );
    for (const f of [kiln, baseline]) {
      if (f.non2xx > 0 || f.errors > 0) notes.push(`Non-2xx or errors during a run: ${JSON.stringify(f.statusCodes)}, ${f.errors} errors.`);
    }
    const fullRows = best('fullRows');
    const figures = [
      throughput('req/s', 'req/s', kiln.reqPerSec, baseline.reqPerSec, TARGET),
      latency('p50', kiln.p50Ms, baseline.p50Ms),
      latency('p99', kiln.p99Ms, baseline.p99Ms),
      {
        ...throughput('req/s of the baseline reading every column (diagnostic)', 'req/s', fullRows.reqPerSec, baseline.reqPerSec),
        baselineLabel: 'lean baseline',
      },
    ];

    let profiles: ScenarioResult['profiles'] = [];
    if (shouldProfile(ctx, figures[0].met === false)) {
      log('polling: profiled pass of the api (5 s, not counted)');
      profiles = (await profiled(ctx, [stack.api!], () => run(kilnUrl, 5))).profiles;
    }

    return {
      id: 'polling',
      title: 'Polling: GET /v1/batches/{id} of a finished 100-task batch',
      method: [
        `${CONNECTIONS} connections, ${opts.pollingDurationSec} s per run (autocannon as a library, in the bench process), after a ${WARMUP_SEC} s warm-up of each server.`,
        `${opts.rounds} alternating rounds (baseline, then Kiln); the best round of each side is reported, every round is in the JSON.`,
        'The batch was created through POST /v1/batches and rendered by the real generator (simulated provider, 0 ms); the generator was stopped before measuring.',
        'Baseline: a bare node:http server in a child process (the api is one too) that checks the same key hash against api_keys and reads the same batch and tasks with pg (pool of 20, like Kiln), returning the same JSON.',
        "Diagnostic row: the same bare server reading every column of the batch and its tasks (SELECT *), as TypeORM's find() does in Kiln, against the lean baseline that reads only the columns the response needs.",
        'The account is on the scale plan with its rate limit raised to 10,000,000/min, so the limiter never refuses; Kiln still does its Redis rate-limit round trip per request.',
      ],
      figures,
      notes,
      profiles,
      details: { batchId: batch.id, sameJson, rounds, ...(sameJson ? {} : { jsonDiff: { kiln: kilnBody.body, baseline: baseBody } }) },
    };
  } finally {
    await base.child.stop();
    await full.child.stop();
  }
}

interface DetailBody {
  batch: { done: boolean; counts: { succeeded: number } };
  tasks: unknown[];
}
