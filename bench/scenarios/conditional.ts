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
import { log, round } from '../lib/util';

const CONNECTIONS = 50;
const WARMUP_SEC = 2;
const TARGET = 0.6;

/** 304s per second of a run (LoadFigures.reqPerSec counts only 2xx). */
const notModifiedPerSec = (f: LoadFigures): number => round((f.statusCodes['304'] ?? 0) / f.durationSec, 1);

/**
 * Conditional polling: GET /v1/batches/{id} with the current ETag in If-None-Match on a
 * finished 100-task batch (every answer a 304), against bare node:http + pg doing the same
 * work (the key hash lookup and one read of the batch's version).
 */
export async function conditional(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack, opts } = ctx;
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const account = await stack.createAccount('conditional');
  await stack.startGenerator();
  const batch = await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(100, 'conditional') });
  await waitAllDone(stack, [account], 120_000);
  await stack.stopGenerator();

  const path = `/v1/batches/${batch.id}`;
  const kilnUrl = `${stack.baseUrl}${path}`;
  const auth = { authorization: `Bearer ${account.key}` };
  const first = await fetch(kilnUrl, { headers: auth });
  const etag = first.headers.get('etag');
  if (first.status !== 200 || !etag) throw new Error(`GET ${path} answered ${first.status} without an ETag`);
  const headers = { ...auth, 'if-none-match': etag };
  const check = await fetch(kilnUrl, { headers });
  if (check.status !== 304) throw new Error(`a conditional GET answered ${check.status}, not 304`);

  const base = await startBaselineServer(ctx, 'conditional-server', { DATABASE_URL: stack.databaseUrl });
  const notes: string[] = [];
  try {
    const baseUrl = `http://127.0.0.1:${base.port}${path}`;
    const baseCheck = await fetch(baseUrl, { headers });
    if (baseCheck.status !== 304) throw new Error(`the baseline answered ${baseCheck.status} to the same conditional GET`);
    const run = (url: string, durationSec: number) => runLoad({ url, headers, connections: CONNECTIONS, durationSec });
    log(`conditional: warm-up (${WARMUP_SEC} s each)`);
    await run(baseUrl, WARMUP_SEC);
    await run(kilnUrl, WARMUP_SEC);

    const rounds: { baseline: LoadFigures; kiln: LoadFigures; baselineWindow: WindowFigures; kilnWindow: WindowFigures }[] = [];
    for (let r = 1; r <= opts.rounds; r++) {
      log(`conditional: round ${r}/${opts.rounds}: baseline then Kiln, ${opts.pollingDurationSec} s each`);
      const bw = await measureWindow(stack, { baseline: base.child.pid });
      const baseline = await run(baseUrl, opts.pollingDurationSec);
      const baselineWindow = await bw();
      const kw = await measureWindow(stack, { api: stack.api!.pid });
      const kiln = await run(kilnUrl, opts.pollingDurationSec);
      const kilnWindow = await kw();
      rounds.push({ baseline, kiln, baselineWindow, kilnWindow });
    }
    const bestRound = (side: 'baseline' | 'kiln') => [...rounds].sort((a, b) => notModifiedPerSec(b[side]) - notModifiedPerSec(a[side]))[0];
    const kiln = bestRound('kiln').kiln;
    const baseline = bestRound('baseline').baseline;
    notes.push(
      `CPU ms per request (best rounds): ${cpuPerUnit('Kiln:', bestRound('kiln').kilnWindow, notModifiedPerSec(kiln))}; ${cpuPerUnit('baseline:', bestRound('baseline').baselineWindow, notModifiedPerSec(baseline))}.`,
    );
    for (const f of [kiln, baseline]) {
      const other = Object.entries(f.statusCodes).filter(([code]) => code !== '304');
      if (other.length > 0 || f.errors > 0)
        notes.push(`Answers other than 304 during a run: ${JSON.stringify(f.statusCodes)}, ${f.errors} errors.`);
    }
    // Diagnostic: the same baseline with both statements prepared, as Kiln's are.
    const prepared = await startBaselineServer(
      ctx,
      'conditional-server-prepared',
      { DATABASE_URL: stack.databaseUrl, PREPARED: '1' },
      'conditional-server',
    );
    let preparedFigures: LoadFigures;
    try {
      const url = `http://127.0.0.1:${prepared.port}${path}`;
      await run(url, WARMUP_SEC);
      log(`conditional: the baseline with prepared statements (diagnostic), ${opts.pollingDurationSec} s`);
      preparedFigures = await run(url, opts.pollingDurationSec);
    } finally {
      await prepared.child.stop();
    }
    // Diagnostic: Kiln as it runs behind a transaction-mode pooler (DATABASE_PREPARED_STATEMENTS=false,
    // docs/operations.md), against Kiln prepared in the last round, both straight to PostgreSQL.
    log(`conditional: Kiln with DATABASE_PREPARED_STATEMENTS=false (diagnostic), ${opts.pollingDurationSec} s`);
    await stack.restartApi({ DATABASE_PREPARED_STATEMENTS: 'false' });
    let unpreparedKiln: LoadFigures;
    try {
      await run(kilnUrl, WARMUP_SEC);
      unpreparedKiln = await run(kilnUrl, opts.pollingDurationSec);
    } finally {
      await stack.restartApi();
    }
    const figures = [
      throughput('304/s', 'req/s', notModifiedPerSec(kiln), notModifiedPerSec(baseline), TARGET),
      latency('p50', kiln.p50Ms, baseline.p50Ms),
      latency('p99', kiln.p99Ms, baseline.p99Ms),
      {
        ...throughput(
          '304/s against the baseline with prepared statements too (diagnostic)',
          'req/s',
          notModifiedPerSec(kiln),
          notModifiedPerSec(preparedFigures),
        ),
        baselineLabel: 'prepared baseline',
      },
      {
        ...throughput(
          '304/s with DATABASE_PREPARED_STATEMENTS=false, against Kiln prepared (diagnostic)',
          'req/s',
          notModifiedPerSec(unpreparedKiln),
          notModifiedPerSec(rounds[rounds.length - 1].kiln),
        ),
        baselineLabel: 'Kiln prepared (last round)',
      },
    ];
    let profiles: ScenarioResult['profiles'] = [];
    if (shouldProfile(ctx, figures[0].met === false)) {
      log('conditional: profiled pass of the api (5 s, not counted)');
      profiles = (await profiled(ctx, [stack.api!], () => run(kilnUrl, 5))).profiles;
    }
    return {
      id: 'conditional',
      title: 'Conditional polling: GET /v1/batches/{id} with a current If-None-Match (304) on a finished 100-task batch',
      method: [
        `${CONNECTIONS} connections, ${opts.pollingDurationSec} s per run, after a ${WARMUP_SEC} s warm-up of each server; ${opts.rounds} alternating rounds, best of each side reported.`,
        "Every answer is a 304: Kiln authenticates the key, counts the request against its rate limit (Redis) and reads the batch row's version; no task is read.",
        'Baseline: a bare node:http server in a child process doing the same key hash lookup and version read with pg (pool of 20), answering the same 304.',
        'Kiln runs both statements as named prepared statements (parsed and planned once per connection); the baseline, as the issue wrote it, sends them unnamed. The diagnostic rows run the same baseline with both statements prepared too, one run after the rounds, and Kiln with DATABASE_PREPARED_STATEMENTS=false (unnamed statements, as behind PgBouncer 1.18 in transaction mode) against its own last round.',
      ],
      figures,
      notes,
      profiles,
      details: { batchId: batch.id, etag, rounds },
    };
  } finally {
    await base.child.stop();
  }
}
