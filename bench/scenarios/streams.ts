import * as http from 'node:http';
import { absolute, FAST_MODEL, prompts } from '../lib/harness';
import { readCpuPressureUs, readCpuSeconds, readProcStatus, sampleRss } from '../lib/children';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round, sleep, waitFor } from '../lib/util';

/** Each key may hold 20 streams and polls; the scenario spreads the streams over keys. */
const PER_KEY = 20;
/** The api caps connections per address; the streams come from several loopback addresses. */
const PER_ADDRESS = 200;
/** Streams per batch: the batches are generated while their streams watch. */
const STREAMS_PER_BATCH = 100;
const IMAGES_PER_BATCH = 100;
const DELAY_P99_TARGET_MS = 250;
const RSS_GROWTH_TARGET_MB = 100;

/** One stream's events: when each task event and the done batch event arrived. */
interface Stream {
  status: number;
  taskAt: Map<string, number>;
  doubled: number;
  doneAt: number | null;
}

/**
 * Progress streams: `--streams` (default 1,000) GET /v1/batches/{id}/events held at once on
 * one api process, over batches a generator then makes (100 streams a batch): the api's RSS
 * growth and CPU, and each task event's delay from the task's commit to its arrival.
 */
export async function streams(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const api = stack.api!;
  const total = ctx.opts.streams;
  const batches = Math.max(1, Math.ceil(total / STREAMS_PER_BATCH));
  await stack.admin('PATCH', '/plans/scale', { maxKeys: 1000 });
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: { min: 50, max: 400 } });
  const account = await stack.createAccount('streams');
  const keys = [account.key];
  while (keys.length < Math.ceil(total / PER_KEY)) {
    keys.push((await stack.admin<{ secret: string }>('POST', `/accounts/${account.id}/keys`, { name: `stream ${keys.length}` })).secret);
  }
  // No generator yet: the batches wait until every stream is open.
  await stack.stopGenerator();
  const ids: string[] = [];
  for (let b = 0; b < batches; b++) {
    ids.push(
      (await stack.createBatch(account, { model: FAST_MODEL, prompts: prompts(IMAGES_PER_BATCH / 4, `stream ${b}`), countPerCombo: 4 })).id,
    );
  }
  const port = Number(new URL(stack.baseUrl).port);
  const gcBefore = await stack.collectGarbage(api);
  const rssBeforeGc = readProcStatus(api.pid)?.rssMb ?? NaN;
  const rss = sampleRss(api.pid);

  log(`streams: opening ${total} streams on ${batches} batch(es) over ${keys.length} keys`);
  const opened: Stream[] = [];
  const ended = Array.from({ length: total }, (_, i) => {
    const s: Stream = { status: 0, taskAt: new Map(), doubled: 0, doneAt: null };
    opened.push(s);
    return follow(port, `/v1/batches/${ids[i % batches]}/events`, keys[i % keys.length], `127.0.0.${2 + Math.floor(i / PER_ADDRESS)}`, s);
  });
  try {
    await waitFor('every stream open', () => Promise.resolve(opened.every((s) => s.status !== 0) ? true : undefined), 120_000, 200);
    await sleep(1000);
    const rssHeld = readProcStatus(api.pid)?.rssMb ?? NaN;
    const gcHeld = await stack.collectGarbage(api);
    const rssHeldGc = readProcStatus(api.pid)?.rssMb ?? NaN;
    log(`streams: all open; api RSS ${round(rssHeld)} MB, ${round(rssHeldGc)} MB after a full GC; starting the generator`);
    const cpuBefore = readCpuSeconds(api.pid) ?? NaN;
    // The streams' client is this process: its CPU competes with Kiln's on the same cores.
    const clientCpuBefore = process.cpuUsage();
    const pressureBefore = readCpuPressureUs() ?? NaN;
    const startedAt = Date.now();
    await stack.startGenerator();
    await Promise.all(ended);
    const wallSec = (Date.now() - startedAt) / 1000;
    const apiCpuSec = (readCpuSeconds(api.pid) ?? NaN) - cpuBefore;
    const clientCpu = process.cpuUsage(clientCpuBefore);
    const pressurePct = ((readCpuPressureUs() ?? NaN) - pressureBefore) / (wallSec * 10_000);
    await stack.stopGenerator();

    // The task's commit time, from the database (the same machine's clock).
    const finished = new Map<string, number>();
    const rows = await stack.db.query<{ id: string; at: string }>(
      `SELECT id, (extract(epoch FROM finished_at) * 1000)::float8 AS at FROM tasks WHERE batch_id = ANY($1::uuid[])`,
      [ids],
    );
    for (const r of rows.rows) finished.set(r.id, Number(r.at));
    const delays: number[] = [];
    let missing = 0;
    let doubled = 0;
    for (const s of opened) {
      doubled += s.doubled;
      missing += Math.max(0, IMAGES_PER_BATCH - s.taskAt.size);
      for (const [task, at] of s.taskAt) {
        const from = finished.get(task);
        if (from !== undefined) delays.push(at - from);
      }
    }
    delays.sort((a, b) => a - b);
    const pct = (p: number) => round(delays[Math.min(delays.length - 1, Math.max(0, Math.ceil((p / 100) * delays.length) - 1))] ?? NaN);
    const statuses: Record<string, number> = {};
    for (const s of opened) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
    const growth = round(rssHeldGc - rssBeforeGc);
    const figures: Figure[] = [
      absolute(`event delay from the task's commit, p99 (${total} streams)`, 'ms', pct(99), DELAY_P99_TARGET_MS),
      absolute("event delay from the task's commit, p50", 'ms', pct(50)),
      absolute('event delay, max', 'ms', pct(100)),
      absolute('api RSS growth while streaming (after a full GC, before and once all open)', 'MB', growth, RSS_GROWTH_TARGET_MB),
      absolute('api peak RSS growth, no GC forced', 'MB', round(rss.peak - rss.before)),
      absolute('api CPU while the batches were generated', 'core-seconds', round(apiCpuSec, 2)),
      absolute('api CPU per delivered task event', 'ms', round((apiCpuSec * 1000) / Math.max(1, delays.length), 3)),
      absolute(
        "the streams' client (the bench process) CPU over the same window",
        'core-seconds',
        round((clientCpu.user + clientCpu.system) / 1e6, 2),
      ),
      absolute('machine CPU pressure over the same window (PSI some: time something waited for a CPU)', '%', round(pressurePct)),
    ];
    const notes: string[] = [];
    if ((statuses['200'] ?? 0) !== total) notes.push(`Not every stream answered 200: ${JSON.stringify(statuses)}.`);
    if (missing > 0) notes.push(`${missing} task event(s) missing across the streams.`);
    if (doubled > 0) notes.push(`${doubled} task event(s) received twice.`);
    if (opened.some((s) => s.doneAt === null)) notes.push('Some streams ended without the done batch event.');
    return {
      id: 'streams',
      title: `Progress streams: ${total} streams held on one api process while ${batches} batch(es) of ${IMAGES_PER_BATCH} images are made`,
      method: [
        `${total} GET /v1/batches/{id}/events, one connection each, ${STREAMS_PER_BATCH} per batch, over ${keys.length} keys of one account (each key may hold ${PER_KEY}) and several loopback addresses.`,
        `The batches are created with no generator running; once every stream has its first events, one generator makes them on a simulated model (50-400 ms a call).`,
        "Event delay: from the task's finished_at (the time of the transaction that made it final, read from PostgreSQL on the same machine) to the arrival of its task event at each stream.",
        "Memory: the api's RSS after a full garbage collection before the streams open and once they are all open; CPU: the api's user+system seconds from the generator's start to the last stream's end.",
        'The 1,000 clients are this one bench process on the same cores as Kiln; the CPU pressure says how much of the window something (Kiln, the client, other work on the machine) waited for a core.',
      ],
      figures,
      notes,
      profiles: [],
      details: {
        batchIds: ids,
        statuses,
        events: delays.length,
        wallSec: round(wallSec),
        rssBeforeAfterGcMb: round(rssBeforeGc),
        rssHeldMb: round(rssHeld),
        rssHeldAfterGcMb: round(rssHeldGc),
        heapUsedAfterGcMb:
          gcBefore && gcHeld ? { before: round(gcBefore.heapUsed / 1048576), held: round(gcHeld.heapUsed / 1048576) } : null,
        delaysMs: { p50: pct(50), p90: pct(90), p99: pct(99), max: pct(100) },
      },
    };
  } finally {
    rss.stop();
    await Promise.allSettled(ended);
  }
}

/** Reads one stream to its end, noting when each task event and the done event arrive. */
function follow(port: number, path: string, key: string, localAddress: string, into: Stream): Promise<void> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        localAddress,
        agent: false,
        headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
      },
      (res) => {
        into.status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          const at = Date.now();
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const type = /^event: (.+)$/m.exec(block)?.[1];
            const data = /^data: (.+)$/m.exec(block)?.[1];
            if (!type || !data) continue;
            const body = JSON.parse(data) as { id: string; done?: boolean };
            if (type === 'task') {
              if (into.taskAt.has(body.id)) into.doubled++;
              else into.taskAt.set(body.id, at);
            } else if (type === 'batch' && body.done) into.doneAt = at;
          }
        });
        res.on('end', () => resolve());
        res.on('error', () => resolve());
      },
    );
    req.on('error', () => {
      into.status = into.status || -1;
      resolve();
    });
    req.end();
  });
}
