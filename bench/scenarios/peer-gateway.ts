import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { NodeChild } from '../lib/children';
import { cpuPerUnit, measureWindow, median } from '../lib/harness';
import { KilnStack } from '../lib/kiln';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round, sleep, waitFor } from '../lib/util';

/** The model routed to the openai/gpt-image-1 preset, pointed at the fake. */
const DOOR_MODEL = 'alpha-image-2';
const SEQUENTIAL_ROUNDS = Number(process.env.KILN_BENCH_PEER_ROUNDS ?? 30);
const IN_FLIGHT = 8;
/** Seconds of each throughput window; every path gets THROUGHPUT_ROUNDS of them, alternating. */
const WINDOW_SEC = Number(process.env.KILN_BENCH_PEER_WINDOW_SEC ?? 5);
const THROUGHPUT_ROUNDS = 2;
const ADDED_P50_TARGET_MS = 10;
const THROUGHPUT_TARGET = 0.5;
const PATHS = ['direct', 'portkey', 'kiln'] as const;
type PathId = (typeof PATHS)[number];

interface Path {
  id: PathId;
  url: string;
  headers: Record<string, string>;
  model: string;
  /** The processes between the client and the fake, sampled for RSS. */
  pids: Record<string, number>;
}

/**
 * Issue 47's peer-gateway scenario: the same fake OpenAI images API (OpenAiFakeUpstream, a
 * process of its own) called directly, through Portkey's open-source gateway
 * (`@portkey-ai/gateway`, headless, production mode, routed with x-portkey-provider and
 * x-portkey-custom-host) and through Kiln's OpenAI-compatible door (a model routed to the
 * openai/gpt-image-1 preset at the fake). Every request is `images.generate` of one
 * 1024x1024 image with `response_format: b64_json`.
 */
export async function peerGateway(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const fake = NodeChild.start({
    name: 'openai-fake',
    script: stack.distPath('bench/lib/openai-fake.main.js'),
    env: process.env,
    logFile: path.join(stack.logDir, 'openai-fake.log'),
  });
  let portkey: NodeChild | null = null;
  try {
    const { baseUrl } = await fake.nextMessage<{ type: string; baseUrl: string }>((m) => m.type === 'ready', 20_000);
    const portkeyPort = await freePort();
    portkey = NodeChild.start({
      name: 'portkey',
      script: path.join(ctx.repoRoot, 'node_modules/@portkey-ai/gateway/build/start-server.js'),
      args: ['--headless', `--port=${portkeyPort}`],
      env: { ...process.env, NODE_ENV: 'production' },
      logFile: path.join(stack.logDir, 'portkey.log'),
    });
    const portkeyUrl = `http://127.0.0.1:${portkeyPort}`;
    await waitFor('Portkey to answer', async () => ((await fetch(portkeyUrl).catch(() => null))?.ok ? true : undefined), 30_000, 200);

    await stack.liftScalePlanLimits();
    await stack.admin('PATCH', `/models/${DOOR_MODEL}`, {
      provider: { preset: 'openai/gpt-image-1', baseUrl },
      enabled: true,
    });
    const account = await stack.createAccount('peer-gateway');
    await stack.startGenerator();
    const paths: Record<PathId, Path> = {
      direct: {
        id: 'direct',
        url: `${baseUrl}/images/generations`,
        headers: { authorization: 'Bearer sk-bench-fake-upstream' },
        model: 'gpt-image-1',
        pids: { fake: fake.pid },
      },
      portkey: {
        id: 'portkey',
        url: `${portkeyUrl}/v1/images/generations`,
        headers: {
          authorization: 'Bearer sk-bench-fake-upstream',
          'x-portkey-provider': 'openai',
          'x-portkey-custom-host': baseUrl,
        },
        model: 'gpt-image-1',
        pids: { fake: fake.pid, portkey: portkey.pid },
      },
      kiln: {
        id: 'kiln',
        url: `${stack.baseUrl}/v1/images/generations`,
        headers: { authorization: `Bearer ${account.key}` },
        model: DOOR_MODEL,
        pids: { fake: fake.pid, api: stack.api!.proc.pid!, generator: stack.generator!.proc.pid! },
      },
    };
    try {
      for (const p of PATHS) for (let i = 0; i < 3; i++) await generate(paths[p], `warm-up ${i}`);
      // Sequential: one request at a time, the three paths in a rotating order each round.
      const sequential: Record<PathId, number[]> = { direct: [], portkey: [], kiln: [] };
      const kilnRequests: ClientSpan[] = [];
      for (let r = 0; r < SEQUENTIAL_ROUNDS; r++) {
        for (let k = 0; k < PATHS.length; k++) {
          const p = PATHS[(r + k) % PATHS.length];
          const sent = epochNow();
          sequential[p].push(await generate(paths[p], `round ${r}`));
          if (p === 'kiln') kilnRequests.push({ sent, got: epochNow() });
        }
      }
      // Throughput: IN_FLIGHT requests at once for WINDOW_SEC, alternating the paths.
      const throughput: Record<PathId, { perSec: number[]; rss: Record<string, number>[]; cpu: string[] }> = {
        direct: { perSec: [], rss: [], cpu: [] },
        portkey: { perSec: [], rss: [], cpu: [] },
        kiln: { perSec: [], rss: [], cpu: [] },
      };
      for (let r = 0; r < THROUGHPUT_ROUNDS; r++) {
        for (let k = 0; k < PATHS.length; k++) {
          const p = PATHS[(r + k) % PATHS.length];
          const w = await window(stack, paths[p], r);
          throughput[p].perSec.push(w.perSec);
          throughput[p].rss.push(w.peakRssMb);
          throughput[p].cpu.push(w.cpu);
          await sleep(500);
        }
      }
      const result = report(sequential, throughput);
      if (TIMELINE_FILE) result.notes.push(...timelineNotes(TIMELINE_FILE, kilnRequests));
      return result;
    } finally {
      await stack.stopGenerator();
    }
  } finally {
    await portkey?.stop();
    await fake.stop();
  }
}

function report(
  sequential: Record<PathId, number[]>,
  throughput: Record<PathId, { perSec: number[]; rss: Record<string, number>[]; cpu: string[] }>,
): Omit<ScenarioResult, 'durationSec'> {
  const p50 = (p: PathId) => round(median(sequential[p]), 1);
  const best = (p: PathId) => round(Math.max(...throughput[p].perSec), 2);
  const direct = { p50: p50('direct'), perSec: best('direct') };
  const figures: Figure[] = [];
  const notes: string[] = [];
  for (const p of ['portkey', 'kiln'] as const) {
    const added = round(p50(p) - direct.p50, 1);
    const ratio = direct.perSec > 0 ? round(best(p) / direct.perSec, 2) : null;
    const label = p === 'kiln' ? 'Kiln door' : 'Portkey 1.15.2';
    figures.push(
      {
        metric: `${label}: added p50, sequential`,
        unit: 'ms',
        kiln: added,
        baseline: direct.p50,
        baselineLabel: 'direct p50',
        ratio: null,
        ...(p === 'kiln' ? { target: `<= ${ADDED_P50_TARGET_MS} ms`, targetOn: 'kiln' as const, met: added <= ADDED_P50_TARGET_MS } : {}),
      },
      {
        metric: `${label}: images/s at ${IN_FLIGHT} in flight`,
        unit: 'images/s',
        kiln: best(p),
        baseline: direct.perSec,
        baselineLabel: 'direct',
        ratio,
        ...(p === 'kiln'
          ? { target: `>= ${THROUGHPUT_TARGET}`, targetOn: 'ratio' as const, met: ratio !== null && ratio >= THROUGHPUT_TARGET }
          : {}),
      },
    );
    log(
      `peer-gateway: ${label} p50 ${p50(p)} ms (direct ${direct.p50}, +${added}); ${best(p)} images/s (direct ${direct.perSec}, x${ratio})`,
    );
  }
  for (const p of PATHS) {
    const rss = throughput[p].rss.reduce<Record<string, number>>((acc, r) => {
      for (const [k, v] of Object.entries(r)) acc[k] = Math.max(acc[k] ?? 0, v);
      return acc;
    }, {});
    notes.push(
      `${p}: p50 ${p50(p)} ms, p90 ${round(quantile(sequential[p], 0.9), 1)} ms over ${sequential[p].length} sequential requests; ` +
        `images/s by round ${throughput[p].perSec.map((v) => round(v, 2)).join(', ')}; peak RSS ${Object.entries(rss)
          .map(([k, v]) => `${k} ${round(v, 0)} MB`)
          .join(', ')}`,
    );
    // Where the CPU of an image goes at 8 in flight, in the best round: on two shared cores the
    // throughput is what the CPU per image allows.
    const bestRound = throughput[p].perSec.indexOf(Math.max(...throughput[p].perSec));
    notes.push(`${p}: CPU ms per image at ${IN_FLIGHT} in flight (best round): ${throughput[p].cpu[bestRound]}`);
  }
  return {
    id: 'peer-gateway',
    title: `Peer gateway: images.generate (b64_json) direct, through Portkey 1.15.2 and through Kiln's door`,
    method: [
      "The fake OpenAI images API (OpenAiFakeUpstream, its own process) answers each request with a 1024x1024 PNG. Three paths to it: direct; Portkey's gateway 1.15.2 (headless, NODE_ENV=production, x-portkey-provider: openai, x-portkey-custom-host: the fake); Kiln's POST /v1/images/generations with a model routed to the openai/gpt-image-1 preset at the fake, one generator.",
      `Sequential: ${SEQUENTIAL_ROUNDS} rounds of one request per path, the order rotating each round; added p50 = the path's median minus direct's. Throughput: ${IN_FLIGHT} requests in flight for ${WINDOW_SEC} s per path, ${THROUGHPUT_ROUNDS} rounds alternating; the best round of each; peak RSS sampled every 100 ms.`,
    ],
    figures,
    notes,
    profiles: [],
    details: { sequential, throughput },
  };
}

async function generate(p: Path, tag: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(p.url, {
    method: 'POST',
    headers: { ...p.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ model: p.model, prompt: `peer gateway ${tag}`, n: 1, size: '1024x1024', response_format: 'b64_json' }),
  });
  const body = (await res.json()) as { data?: { b64_json?: string }[] };
  if (res.status !== 200 || !body.data?.[0]?.b64_json) throw new Error(`${p.id}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return performance.now() - t0;
}

async function window(
  stack: KilnStack,
  p: Path,
  roundNo: number,
): Promise<{ perSec: number; peakRssMb: Record<string, number>; cpu: string }> {
  const measured = await measureWindow(stack, p.pids);
  const end = performance.now() + WINDOW_SEC * 1000;
  const t0 = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async (_, w) => {
      for (let i = 0; performance.now() < end; i++) {
        await generate(p, `window ${roundNo} worker ${w} ${i}`);
        done++;
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const w = await measured();
  const perSec = done / wall;
  const client = `; the bench's client ${round((w.benchCores / perSec) * 1000, 2)}`;
  return {
    perSec,
    peakRssMb: Object.fromEntries(Object.entries(w.processes).map(([k, f]) => [k, f.peakRssMb])),
    cpu: `${cpuPerUnit('', w, perSec).trim()}${client}`,
  };
}

function quantile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

async function freePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * KILN_STAGE_TIMELINE=<file> (in the bench's environment, so Kiln's processes inherit it):
 * the api and the generator stamp each door request's stages into the file (libs/metrics
 * stage-timeline.ts) and the scenario reports the sequential requests' timeline.
 */
const TIMELINE_FILE = process.env.KILN_STAGE_TIMELINE || null;
/** The stages of one door request, in the order they happen; `sent` and `got` are the client's. */
const STAGES = [
  'sent',
  'received',
  'committed',
  'enqueued',
  'taken',
  'routed',
  'admitted',
  'claimed',
  'called',
  'answered',
  'stored',
  'succeeded',
  'woken',
  'detailed',
  'inlined',
  'got',
] as const;

interface ClientSpan {
  sent: number;
  got: number;
}

function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * The median time of each stage after the one before it, over the sequential door requests
 * (one at a time, so a batch is matched to the request whose span holds its `received`). A
 * stage stamped more than once for a batch (`woken` by an earlier change) counts its last
 * stamp before the next stage's.
 */
export function timelineNotes(file: string, spans: ClientSpan[]): string[] {
  const byBatch = new Map<string, Map<string, number[]>>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [at, id, stage] = line.split(' ');
    if (!stage) continue;
    const stages = byBatch.get(id) ?? new Map<string, number[]>();
    byBatch.set(id, stages);
    stages.set(stage, [...(stages.get(stage) ?? []), Number(at)]);
  }
  const steps = new Map<string, number[]>();
  let matched = 0;
  for (const span of spans) {
    const found = [...byBatch.values()].find((s) => (s.get('received')?.[0] ?? -1) >= span.sent && s.get('received')![0] <= span.got);
    if (!found) continue;
    matched++;
    const times = new Map<string, number[]>([...found, ['sent', [span.sent]], ['got', [span.got]]]);
    let previous: { stage: string; at: number } | null = null;
    for (let i = 0; i < STAGES.length; i++) {
      const next = STAGES.slice(i + 1).find((s) => times.has(s));
      const limit = next ? times.get(next)![0] : Infinity;
      const at = (times.get(STAGES[i]) ?? []).filter((t) => t <= limit).pop();
      if (at === undefined) continue;
      if (previous) {
        const key = `${previous.stage} -> ${STAGES[i]}`;
        steps.set(key, [...(steps.get(key) ?? []), at - previous.at]);
      }
      previous = { stage: STAGES[i], at };
    }
  }
  const parts = [...steps].map(([key, ms]) => `${key} ${round(median(ms), 2)}`);
  return [`Door timeline, median ms per stage over ${matched} sequential requests: ${parts.join('; ')}`];
}
