import * as fs from 'node:fs';
import * as path from 'node:path';
import { GroupCpuSampler, NodeChild, ProcessFigures, ProcessSampler } from './children';
import { BenchAccount, KilnStack } from './kiln';
import { summarizeProfile, ProfileSummary } from './profile';
import { BenchContext, Figure } from './types';
import { round, sleep, waitFor } from './util';

/** 1 credit per 1K image: the model every throughput scenario routes to `simulated`. */
export const FAST_MODEL = 'eta-image';
/** 1K only; routed to a `simulated` provider with 1 s latency by the latency scenario. */
export const SLOW_MODEL = 'beta-2-lite';
/** Offers 4K and stays on the `builtin` renderer (the seed default). */
export const BUILTIN_4K_MODEL = 'gamma-5-lite';

/** Kiln's task queue as the README documents it: Bull queue `kiln-tasks` under `<REDIS_PREFIX>:bull`. */
export const KILN_QUEUE = 'kiln-tasks';

export function prompts(n: number, tag: string): string[] {
  return Array.from({ length: n }, (_, i) => `${tag} ${i + 1}: a small brick kiln on a quiet hillside at dusk, soft light`);
}

/** Forks bench/baselines/<script>.js and waits until it listens; returns its port. */
export async function startBaselineServer(
  ctx: BenchContext,
  name: string,
  env: Record<string, string>,
  script = name,
): Promise<{ child: NodeChild; port: number }> {
  const child = NodeChild.start({
    name,
    script: path.join(ctx.repoRoot, 'dist/bench/baselines', `${script}.js`),
    env: { ...process.env, ...env },
    logFile: path.join(ctx.stack.logDir, `${name}.log`),
  });
  const msg = await child.nextMessage<{ type: string; port: number }>((m) => m.type === 'listening', 20_000);
  return { child, port: msg.port };
}

/**
 * Waits until every batch of these accounts is done; returns when (ms epoch). Polls the
 * batches' finished_at (cheap), then confirms once that no task is left unfinished, which
 * is what the API's `done` means.
 */
export async function waitAllDone(stack: KilnStack, accounts: BenchAccount[], timeoutMs: number, intervalMs = 50): Promise<number> {
  const ids = accounts.map((a) => a.id);
  const at = await waitFor(
    'every batch to finish',
    async () => {
      if (stack.generator && !stack.generator.running) throw new Error(`the generator exited; see ${stack.generator.logFile}`);
      return (await stack.unfinishedBatches(ids)) === 0 ? Date.now() : undefined;
    },
    timeoutMs,
    intervalMs,
  );
  const left = await stack.unfinishedTasks(ids);
  if (left > 0) throw new Error(`every batch is marked finished but ${left} task(s) are not`);
  return at;
}

/**
 * Runs `fn` with the CPU profiler of each of `children` on (see profiler-preload.ts) and
 * returns the summaries of the profiles they write.
 */
export async function profiled<T>(
  ctx: BenchContext,
  children: NodeChild[],
  fn: () => Promise<T>,
): Promise<{ result: T; profiles: ProfileSummary[] }> {
  for (const c of children) ctx.stack.startProfiler(c);
  await sleep(200);
  const stopAll = async () =>
    (await Promise.all(children.map((c) => ctx.stack.stopProfiler(c).catch(() => null)))).filter((f): f is string => !!f);
  let result: T;
  try {
    result = await fn();
  } catch (err) {
    await stopAll();
    throw err;
  }
  const files = await stopAll();
  const profiles = files.map((f) => summarizeProfile(f, ctx.repoRoot));
  if (ctx.opts.keep) {
    // Kept beside the results for a closer look (e.g. in Chrome DevTools).
    const keepDir = path.join(ctx.opts.outDir, 'profiles');
    fs.mkdirSync(keepDir, { recursive: true });
    for (const f of files) fs.copyFileSync(f, path.join(keepDir, path.basename(f)));
  }
  return { result, profiles };
}

/** Whether to take the extra profiled pass of a scenario. */
export function shouldProfile(ctx: BenchContext, shortOfTarget: boolean): boolean {
  if (ctx.opts.noProfile) return false;
  return ctx.opts.profileAll || shortOfTarget;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export interface WindowFigures {
  processes: Record<string, ProcessFigures>;
  /** Average cores used over the window by the database's backends and the Redis server. */
  postgresCores: number;
  redisCores: number;
  /** The bench process itself: the load generator or the producers. */
  benchCores: number;
}

/**
 * Samples RSS and CPU of the named processes, plus the CPU of PostgreSQL, Redis and the
 * bench, over one measurement window. Call the returned function at the window's end.
 */
export async function measureWindow(
  stack: KilnStack,
  pids: Record<string, number>,
  intervalMs = 100,
): Promise<() => Promise<WindowFigures>> {
  const sampler = new ProcessSampler(pids, intervalMs).start();
  const pg = await new GroupCpuSampler(async () => (await stack.servicePids()).postgres).begin();
  const redis = await new GroupCpuSampler(async () => (await stack.servicePids()).redis).begin();
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  let result: WindowFigures | undefined;
  return async () => {
    if (result) return result;
    const own = process.cpuUsage(cpu0);
    const wall = Math.max(0.001, (Date.now() - t0) / 1000);
    const processes: Record<string, ProcessFigures> = {};
    for (const [k, v] of Object.entries(sampler.stop())) {
      processes[k] = {
        peakRssMb: round(v.peakRssMb, 0),
        hwmMb: round(v.hwmMb, 0),
        cpuCores: round(v.cpuCores, 2),
        systemCores: round(v.systemCores ?? 0, 2),
      };
    }
    result = {
      processes,
      postgresCores: round(await pg.end(), 2),
      redisCores: round(await redis.end(), 2),
      benchCores: round((own.user + own.system) / 1e6 / wall, 2),
    };
    return result;
  };
}

/**
 * "CPU ms per <unit>" of each process in a window, from its average cores and the rate of
 * work done in it: where the time goes, in a form that survives a noisy machine better than
 * throughput does.
 */
export function cpuPerUnit(label: string, window: WindowFigures, perSec: number): string {
  if (!(perSec > 0)) return `${label}: no work done`;
  const ms = (cores: number) => round((cores / perSec) * 1000, 2);
  // A process's kernel share in brackets: on a VM's disk the generator's file writes cost more there than in Node.
  const parts = Object.entries(window.processes).map(
    ([name, p]) => [p.systemCores ? `${name} (system ${ms(p.systemCores)})` : name, ms(p.cpuCores)] as const,
  );
  parts.push(['PostgreSQL', ms(window.postgresCores)], ['Redis', ms(window.redisCores)]);
  const total = round(
    parts.reduce((sum, [, v]) => sum + v, 0),
    2,
  );
  return `${label} ${parts.map(([n, v]) => `${n} ${v}`).join(' + ')} = ${total}`;
}

/** Milliseconds of CPU per unit of work, every sampled process plus PostgreSQL and Redis together. */
export function cpuMsPerUnit(window: WindowFigures, perSec: number): number {
  if (!(perSec > 0)) return NaN;
  const cores = Object.values(window.processes).reduce((sum, p) => sum + p.cpuCores, 0) + window.postgresCores + window.redisCores;
  return round((cores / perSec) * 1000, 2);
}

/** A figure against an absolute bound (met when below it), or none. */
export function absolute(metric: string, unit: string, kiln: number, below?: number): Figure {
  return {
    metric,
    unit,
    kiln,
    baseline: null,
    ratio: null,
    ...(below !== undefined
      ? { baselineLabel: `limit ${below} ${unit}`, target: `< ${below} ${unit}`, targetOn: 'kiln' as const, met: kiln < below }
      : {}),
  };
}
