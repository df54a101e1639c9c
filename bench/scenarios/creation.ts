import { randomUUID } from 'node:crypto';
import Bull from 'bull';
import { BenchAccount, KilnStack } from '../lib/kiln';
import {
  cpuPerUnit,
  FAST_MODEL,
  KILN_QUEUE,
  measureWindow,
  median,
  profiled,
  prompts,
  shouldProfile,
  startBaselineServer,
  WindowFigures,
} from '../lib/harness';
import { LoadFigures, runLoad } from '../lib/load';
import { BenchContext, Figure, latency, ScenarioResult, throughput } from '../lib/types';
import { log, round } from '../lib/util';

const CONNECTIONS = 10;
const IMAGES = 100;
const WARMUP_SEC = 2;
const TARGET = 0.5;
/** Issue 26: with one account per connection, at least the raw baseline (1.25 when set). */
const TARGET_MANY = 1.0;

/** Scenario 2: POST /v1/batches with 100 prompts, against one raw pg transaction + raw bull addBulk. */
export async function creation(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack, opts } = ctx;
  // No generator: it would compete for the two cores; the jobs pile up in Redis and are discarded after.
  await stack.stopGenerator();
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const kilnAccounts = [await stack.createAccount('creation')];
  const baseAccounts = [await stack.createAccount('creation-baseline')];
  for (let i = 1; i < CONNECTIONS; i++) {
    kilnAccounts.push(await stack.createAccount('creation'));
    baseAccounts.push(await stack.createAccount('creation-baseline'));
  }

  const base = await startBaselineServer(ctx, 'creation-server', {
    DATABASE_URL: stack.databaseUrl,
    REDIS_URL: stack.opts.redisUrl,
    RAW_BULL_PREFIX: `${stack.rawPrefix}:bull`,
  });
  const notes: string[] = [];
  try {
    const body = JSON.stringify({ model: FAST_MODEL, prompts: prompts(IMAGES, 'creation') });
    const headers = (a: BenchAccount) => ({ authorization: `Bearer ${a.key}`, 'content-type': 'application/json' });
    const run = (url: string, accounts: BenchAccount[], durationSec: number) =>
      runLoad({
        url,
        method: 'POST',
        body,
        headers: headers(accounts[0]),
        headersPerConnection: accounts.map(headers),
        connections: CONNECTIONS,
        durationSec,
      });
    const baseUrl = `http://127.0.0.1:${base.port}/v1/batches`;
    const kilnUrl = `${stack.baseUrl}/v1/batches`;

    // One request each first, so a broken route fails here and not as a page of non-2xx.
    const probe = await stack.request('POST', '/v1/batches', kilnAccounts[0].key, JSON.parse(body));
    if (probe.status !== 201) throw new Error(`POST /v1/batches: ${probe.status} ${JSON.stringify(probe.body)}`);
    const baseProbe = await fetch(baseUrl, { method: 'POST', body, headers: headers(baseAccounts[0]) });
    if (baseProbe.status !== 201) throw new Error(`baseline POST: ${baseProbe.status} ${await baseProbe.text()}`);

    log(`creation: warm-up (${WARMUP_SEC} s each)`);
    await run(baseUrl, baseAccounts, WARMUP_SEC);
    await run(kilnUrl, kilnAccounts, WARMUP_SEC);

    const variants = [
      { label: 'one account', kiln: kilnAccounts.slice(0, 1), baseline: baseAccounts.slice(0, 1), target: TARGET },
      { label: `${CONNECTIONS} accounts`, kiln: kilnAccounts, baseline: baseAccounts, target: TARGET_MANY },
    ];
    const figures: Figure[] = [];
    const all = [...kilnAccounts, ...baseAccounts];
    const rounds: Record<string, Round[]> = {};
    for (const v of variants) {
      const mine: Round[] = (rounds[v.label] = []);
      for (let r = 1; r <= opts.rounds; r++) {
        log(
          `creation (${v.label}): round ${r}/${opts.rounds}: baseline ${opts.creationDurationSec} s, then Kiln ${opts.creationDurationSec} s`,
        );
        // Every run starts from empty queues and no open batches: nothing consumes the jobs
        // here, and a backlog makes each later enqueue dearer (see the priority diagnostic).
        await discardBatches(stack, all);
        const bw = await measureWindow(stack, { baseline: base.child.pid });
        const baseline = await run(baseUrl, v.baseline, opts.creationDurationSec);
        const baselineWindow = await bw();
        await discardBatches(stack, all);
        const kw = await measureWindow(stack, { api: stack.api!.pid });
        const kiln = await run(kilnUrl, v.kiln, opts.creationDurationSec);
        const kilnWindow = await kw();
        const backlog = await waitingJobs(stack);
        mine.push({ baseline, kiln, baselineWindow, kilnWindow, kilnBacklogAfter: backlog });
      }
      const bestRound = (side: 'baseline' | 'kiln') => [...mine].sort((a, b) => b[side].reqPerSec - a[side].reqPerSec)[0];
      const kiln = bestRound('kiln').kiln;
      const baseline = bestRound('baseline').baseline;
      notes.push(
        `CPU ms per batch, ${v.label} (best rounds): ${cpuPerUnit('Kiln:', bestRound('kiln').kilnWindow, kiln.reqPerSec)}; ${cpuPerUnit('baseline:', bestRound('baseline').baselineWindow, baseline.reqPerSec)}.`,
      );
      for (const [who, f] of [
        ['Kiln', kiln],
        ['baseline', baseline],
      ] as const) {
        if (f.non2xx > 0 || f.errors > 0) {
          notes.push(`${who} (${v.label}): non-2xx or errors during the best run: ${JSON.stringify(f.statusCodes)}, ${f.errors} errors.`);
        }
      }
      figures.push(
        throughput(`batches/s, ${v.label}`, 'batches/s', kiln.reqPerSec, baseline.reqPerSec, v.target),
        throughput(`images/s, ${v.label}`, 'images/s', round(kiln.reqPerSec * IMAGES, 0), round(baseline.reqPerSec * IMAGES, 0)),
        latency(`p50, ${v.label}`, kiln.p50Ms, baseline.p50Ms),
        latency(`p99, ${v.label}`, kiln.p99Ms, baseline.p99Ms),
      );
    }

    log('creation: priority diagnostic (raw bull addBulk of 100 jobs into an empty and a 20,000-job queue)');
    const priorityCost = await priorityInsertCost(stack);
    figures.push(
      {
        ...latency(
          'addBulk of 100 prioritized jobs, 20,000 waiting (diagnostic)',
          priorityCost.prioritizedBacklog,
          priorityCost.prioritizedEmpty,
        ),
        baselineLabel: 'empty queue',
      },
      {
        ...latency('addBulk of 100 plain jobs, 20,000 waiting (diagnostic)', priorityCost.plainBacklog, priorityCost.plainEmpty),
        baselineLabel: 'empty queue',
      },
    );

    let profiles: ScenarioResult['profiles'] = [];
    if (
      shouldProfile(
        ctx,
        figures.some((f) => f.met === false),
      )
    ) {
      log('creation: profiled pass of the api (one account, 5 s, not counted)');
      await discardBatches(stack, all);
      profiles = (await profiled(ctx, [stack.api!], () => run(kilnUrl, kilnAccounts.slice(0, 1), 5))).profiles;
    }

    const discarded = await discardBatches(stack, all);
    // The runs' hundreds of thousands of task rows, just deleted, are dead tuples in tasks and
    // its indexes until autovacuum's next visit (up to a minute away): the scenarios after this
    // one (the pipeline's first) would pay for them. Measured: PostgreSQL's CPU per pipeline task
    // 0.65-0.92 ms right after this scenario, 0.44-0.46 after this VACUUM (bench/findings.md).
    await stack.db.query(`VACUUM ANALYZE tasks, batches`);
    return {
      id: 'creation',
      title: `Creation: POST /v1/batches with ${IMAGES} prompts (${IMAGES} images, 1 credit each)`,
      method: [
        `${CONNECTIONS} connections, ${opts.creationDurationSec} s per run, after a ${WARMUP_SEC} s warm-up of each server; ${opts.rounds} alternating rounds (baseline, then Kiln), best of each side reported.`,
        `"One account": all ${CONNECTIONS} connections use one account's key, so its creations serialize on the account row lock, in Kiln and in the baseline alike (the figure the target applies to). "${CONNECTIONS} accounts": one account per connection, which shows the cost of the work rather than of the lock.`,
        'Accounts are on the scale plan with 10^9 credits, maxConcurrentBatches 10,000 and a rate limit of 10,000,000/min, so no limit refuses a request.',
        "The generator is stopped during this scenario so it does not compete for CPU; before every run the queued jobs and the batches of earlier runs are discarded (queues emptied, rows deleted), so each run starts from an empty queue; details.rounds[].kilnBacklogAfter is the waiting jobs Kiln's run left. After the last run its rows are deleted and tasks and batches vacuumed, so the next scenario does not pay for them.",
        "Priority diagnostic: raw bull on the baseline prefix, the median time of 10 addBulk calls of 100 jobs into an empty queue and into one already holding 20,000 waiting jobs, with priorities 1..100 (as Kiln's dispatch gave them until 2026-11-23, seq + 1) and without. It is why Kiln no longer uses Bull priorities (bench/findings.md).",
        'Baseline (child process, node:http): key-hash check and model price read, then one pg transaction with the same writes (conditional charge UPDATE that locks the account, ledger row, batch row, 100 task rows in one multi-row INSERT), then one raw bull addBulk of 100 jobs (jobId = task id) under its own Redis prefix.',
        "Kiln does more by design, all of it measured: a Redis rate-limit call, DTO validation, the plan and concurrency checks under the lock, the key cap lock. It enqueues less at creation, by design too: a batch is enqueued whole only while the queue holds fewer than QUEUE_DEPTH (100) jobs, which no generator consumes here, so after the first batch each gets its first DISPATCH_WINDOW (10) tasks written queued and added to Bull by the request, the other 90 stay pending in PostgreSQL until a generator's feeder enqueues them in fair order. Their Redis adds and the UPDATE to queued are thus paid in the pipeline scenario, not here.",
      ],
      figures,
      notes,
      profiles,
      details: { rounds, discarded },
    };
  } finally {
    await base.child.stop();
  }
}

interface Round {
  baseline: LoadFigures;
  kiln: LoadFigures;
  baselineWindow: WindowFigures;
  kilnWindow: WindowFigures;
  kilnBacklogAfter: number;
}

async function waitingJobs(stack: KilnStack): Promise<number> {
  const queue = new Bull(KILN_QUEUE, stack.opts.redisUrl, { prefix: `${stack.redisPrefix}:bull` });
  try {
    return (await queue.getJobCounts()).waiting;
  } finally {
    await queue.close();
  }
}

/**
 * Bull inserts a prioritized job into the wait list with LINSERT, which walks the list:
 * each add costs O(jobs waiting). Measures one addBulk of 100 jobs (median of 10) into an
 * empty queue and into a 20,000-job backlog (about what a Kiln creation run leaves), with and without priorities, in ms.
 */
const BACKLOG = 20_000;

async function priorityInsertCost(
  stack: KilnStack,
): Promise<{ prioritizedEmpty: number; prioritizedBacklog: number; plainEmpty: number; plainBacklog: number }> {
  const queue = new Bull('bench-priority', stack.opts.redisUrl, { prefix: `${stack.rawPrefix}:bull` });
  const job = (priority: number | undefined) => {
    const taskId = randomUUID();
    return { name: 'render', data: { taskId }, opts: { jobId: taskId, ...(priority ? { priority } : {}) } };
  };
  const timeAdds = async (prioritized: boolean): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await queue.addBulk(Array.from({ length: 100 }, (_, seq) => job(prioritized ? seq + 1 : undefined)));
      times.push(performance.now() - t0);
    }
    return round(median(times), 1);
  };
  const fill = async (prioritized: boolean) => {
    for (let n = 0; n < BACKLOG; n += 500) {
      await queue.addBulk(Array.from({ length: 500 }, (_, i) => job(prioritized ? ((n + i) % 100) + 1 : undefined)));
    }
  };
  try {
    await queue.isReady();
    // Loads bull's Lua scripts into Redis first, so the first timing is not the load.
    await queue.addBulk([job(1), job(undefined)]);
    const out = { prioritizedEmpty: 0, prioritizedBacklog: 0, plainEmpty: 0, plainBacklog: 0 };
    for (const prioritized of [true, false]) {
      await queue.empty();
      const empty = await timeAdds(prioritized);
      await queue.empty();
      await fill(prioritized);
      const full = await timeAdds(prioritized);
      if (prioritized) Object.assign(out, { prioritizedEmpty: empty, prioritizedBacklog: full });
      else Object.assign(out, { plainEmpty: empty, plainBacklog: full });
    }
    await queue.empty();
    return out;
  } finally {
    await queue.close();
  }
}

/**
 * Empties Kiln's queue and the baseline's, then deletes these accounts' batches (their tasks
 * cascade), so no later scenario's generator spends time on them and its reconciler finds
 * nothing to re-enqueue.
 */
async function discardBatches(stack: KilnStack, accounts: BenchAccount[]): Promise<{ batches: number }> {
  for (const [name, prefix] of [
    [KILN_QUEUE, `${stack.redisPrefix}:bull`],
    ['bench-create', `${stack.rawPrefix}:bull`],
  ]) {
    const queue = new Bull(name, stack.opts.redisUrl, { prefix });
    try {
      await queue.empty();
    } finally {
      await queue.close();
    }
  }
  const { rowCount } = await stack.db.query(`DELETE FROM batches WHERE account_id = ANY($1::uuid[])`, [accounts.map((a) => a.id)]);
  return { batches: rowCount ?? 0 };
}
