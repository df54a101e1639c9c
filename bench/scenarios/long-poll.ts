import * as http from 'node:http';
import { absolute, FAST_MODEL } from '../lib/harness';
import { readCpuSeconds, readProcStatus, sampleRss } from '../lib/children';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round, sleep } from '../lib/util';

/** Held requests at once, as the target states. */
const HELD = 1000;
/** Each key may hold 20; the scenario spreads the requests over this many keys. */
const PER_KEY = 20;
/** The api caps connections per address; the requests come from several loopback addresses. */
const PER_ADDRESS = 200;
const WAIT_SECONDS = 30;
const RELEASE_P99_TARGET_MS = 250;
const RSS_GROWTH_TARGET_MB = 100;

interface Held {
  status: number;
  endedAt: number;
}

/**
 * Long polling: HELD requests held at once on one api process (`Prefer: wait=30` with the
 * current If-None-Match), then the batch changes (a cancel through the API): how soon every
 * held request answers, how much the api's memory grows, and whether any database connection
 * is busy while they wait.
 */
export async function longPoll(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const api = stack.api!;
  await stack.admin('PATCH', '/plans/scale', { maxKeys: 1000 });
  await stack.liftScalePlanLimits();
  const account = await stack.createAccount('long-poll');
  const keys = [account.key];
  while (keys.length < Math.ceil(HELD / PER_KEY)) {
    keys.push((await stack.admin<{ secret: string }>('POST', `/accounts/${account.id}/keys`, { name: `poll ${keys.length}` })).secret);
  }
  // No generator runs: the batch stays unfinished and unchanged until the cancel.
  await stack.stopGenerator();
  const batch = await stack.createBatch(account, { model: FAST_MODEL, prompts: ['a batch that waits'], countPerCombo: 4 });
  const path = `/v1/batches/${batch.id}`;
  const first = await fetch(`${stack.baseUrl}${path}`, { headers: { authorization: `Bearer ${account.key}` } });
  const etag = first.headers.get('etag');
  if (!etag) throw new Error(`GET ${path} answered ${first.status} without an ETag`);

  const port = Number(new URL(stack.baseUrl).port);
  const rss = sampleRss(api.pid);
  // The growth is measured between two full collections: a peak taken whenever V8 chose to
  // collect depends on how far the api's heap had already grown (0.5 MB after the polling
  // scenarios in one full run, 90 MB in another, 84-110 MB on a fresh api; findings.md).
  const gcBefore = await stack.collectGarbage(api);
  const rssBeforeGc = readProcStatus(api.pid)?.rssMb ?? NaN;

  log(`long-poll: holding ${HELD} requests (Prefer: wait=${WAIT_SECONDS}) over ${keys.length} keys`);
  let early = 0;
  const held = Array.from({ length: HELD }, (_, i) =>
    hold(port, path, keys[i % keys.length], etag, `127.0.0.${2 + Math.floor(i / PER_ADDRESS)}`).then((r) => {
      if (!changedAt) early++;
      return r;
    }),
  );
  let changedAt = 0;
  try {
    // Every request sent and parked: the api answers none before the change, and once it has
    // taken them all in its CPU goes quiet.
    await sleep(1000);
    const settledAfter = await untilIdle(api.pid, 120_000);
    log(`long-poll: the api went idle ${round(settledAfter / 1000)} s after the last request was sent`);
    const [{ busy }] = (
      await stack.db.query<{ busy: number }>(
        `SELECT count(*)::int AS busy FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()`,
      )
    ).rows;
    const rssHeld = readProcStatus(api.pid)?.rssMb ?? NaN;
    const gcHeld = await stack.collectGarbage(api);
    const rssHeldGc = readProcStatus(api.pid)?.rssMb ?? NaN;
    // The collection's own after-work (sweeping, the heap shrinking) must not run into the release.
    await untilIdle(api.pid, 10_000);
    log(
      `long-poll: ${busy} busy database connection(s) while held; api RSS ${round(rssHeld)} MB, ${round(rssHeldGc)} MB after a full GC; changing the batch`,
    );
    changedAt = Date.now();
    const cancel = await stack.request('POST', `${path}/cancel`, account.key);
    const cancelAnsweredAt = Date.now();
    if (cancel.status !== 200) throw new Error(`the cancel answered ${cancel.status}`);
    const answers = await Promise.all(held);
    const latencies = answers.map((a) => a.endedAt - changedAt).sort((a, b) => a - b);
    const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)];
    // The change commits somewhere inside the cancel request; its answer is a later bound.
    const afterAnswer = answers.map((a) => a.endedAt - cancelAnsweredAt).sort((a, b) => a - b);
    const pctAfterAnswer = (p: number) => afterAnswer[Math.min(afterAnswer.length - 1, Math.ceil((p / 100) * afterAnswer.length) - 1)];
    const statuses: Record<string, number> = {};
    for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    const growth = round(rssHeldGc - rssBeforeGc);
    const peakGrowth = round(rss.peak - rss.before);
    const heapGrowthMb = gcBefore && gcHeld ? (gcHeld.heapUsed - gcBefore.heapUsed) / 1048576 : NaN;
    const figures: Figure[] = [
      absolute(`release after the change, p99 (${HELD} held)`, 'ms', pct(99), RELEASE_P99_TARGET_MS),
      absolute('release after the change, p50', 'ms', pct(50)),
      absolute('release after the change, max', 'ms', latencies[latencies.length - 1]),
      absolute('the cancel request itself (the change)', 'ms', cancelAnsweredAt - changedAt),
      absolute('release after the cancel answered, p99', 'ms', pctAfterAnswer(99)),
      absolute('api RSS growth while holding (after a full GC, before and while held)', 'MB', growth, RSS_GROWTH_TARGET_MB),
      absolute('api peak RSS growth, no GC forced (diagnostic: the figure until 2026-11-25)', 'MB', peakGrowth),
      absolute('api heap used after a full GC, per held request', 'KB', round((heapGrowthMb * 1024) / HELD, 1)),
      absolute('database connections busy while held', 'connections', busy, 1),
    ];
    const notes: string[] = [];
    if ((statuses['200'] ?? 0) !== HELD) notes.push(`Not every held request answered 200 with the change: ${JSON.stringify(statuses)}.`);
    if (early > 0) notes.push(`${early} request(s) answered before the change.`);
    return {
      id: 'long-poll',
      title: `Long polling: ${HELD} requests held on one api process, released by one change`,
      method: [
        `${HELD} GET /v1/batches/{id} with Prefer: wait=${WAIT_SECONDS} and the current If-None-Match, one connection each, over ${keys.length} keys of one account (each key may hold ${PER_KEY}) and several loopback addresses (the api caps connections per address).`,
        'No generator runs, so nothing changes the batch until the bench cancels it through the API, once the api has taken every request in (its CPU quiet for half a second).',
        "Release latency: from just before the cancel request is sent to each held answer's end (it includes the cancel request and its transaction, which commits the change somewhere inside it); also from the cancel's answer (a later bound on the commit). Busy connections from pg_stat_activity while held.",
        "Memory: the api's RSS (from /proc) after a full garbage collection (the inspector's, through the bench's preload) just before the requests are sent and again once they are all held; its heap used after both collections, per held request. The peak RSS sampled every 50 ms from /proc without forcing a collection, less the RSS before, is kept as a diagnostic: it depends on how far the api's heap had grown before the scenario.",
      ],
      figures,
      notes,
      profiles: [],
      details: {
        batchId: batch.id,
        statuses,
        rssBeforeMb: round(rss.before),
        rssBeforeAfterGcMb: round(rssBeforeGc),
        rssHeldMb: round(rssHeld),
        rssHeldAfterGcMb: round(rssHeldGc),
        rssPeakMb: round(rss.peak),
        heapUsedAfterGcMb:
          gcBefore && gcHeld ? { before: round(gcBefore.heapUsed / 1048576), held: round(gcHeld.heapUsed / 1048576) } : null,
        latenciesMs: { p50: pct(50), p90: pct(90), p99: pct(99), max: latencies[latencies.length - 1] },
      },
    };
  } finally {
    rss.stop();
    await Promise.allSettled(held);
  }
}

/** Waits until the process uses under 5 % of a core over half a second; returns how long that took. */
async function untilIdle(pid: number, timeoutMs: number): Promise<number> {
  const started = Date.now();
  let before = readCpuSeconds(pid) ?? 0;
  while (Date.now() - started < timeoutMs) {
    await sleep(500);
    const now = readCpuSeconds(pid) ?? 0;
    if (now - before < 0.025) break;
    before = now;
  }
  return Date.now() - started;
}

function hold(port: number, path: string, key: string, etag: string, localAddress: string): Promise<Held> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        localAddress,
        agent: false,
        timeout: (WAIT_SECONDS + 10) * 1000,
        headers: { authorization: `Bearer ${key}`, 'if-none-match': etag, prefer: `wait=${WAIT_SECONDS}` },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, endedAt: Date.now() }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, endedAt: Date.now() }));
    req.end();
  });
}
