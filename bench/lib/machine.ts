import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import Redis from 'ioredis';
import { Pool } from 'pg';

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGb: number;
  kernel: string;
  node: string;
  postgres: string;
  redis: string;
  gitCommit: string;
  /** Files changed in the working tree: the figures describe the commit plus these. */
  gitUncommitted: number;
  loadAverageAtStart: number[];
}

export async function machineInfo(repoRoot: string, db: Pool, redisUrl: string): Promise<MachineInfo> {
  const cpuinfo = safe(() => fs.readFileSync('/proc/cpuinfo', 'utf8'), '');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  const { rows } = await db.query<{ server_version: string }>('SHOW server_version');
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 2 });
  let redisVersion: string;
  try {
    redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
  } finally {
    redis.disconnect();
  }
  const git = (...args: string[]) => safe(() => execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8' }).trim(), '');
  return {
    cpuModel: model,
    cores: os.availableParallelism(),
    memoryGb: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    postgres: rows[0].server_version,
    redis: redisVersion,
    gitCommit: git('rev-parse', '--short=12', 'HEAD') || 'unknown',
    gitUncommitted: git('status', '--porcelain').split('\n').filter(Boolean).length,
    loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

/**
 * Other work on the machine while the bench ran (test suites, other node processes using
 * CPU), so the results say when their figures are noisy. Looks at /proc once.
 */
export function otherBusyProcesses(ownPids: number[]): string[] {
  const found: string[] = [];
  for (const entry of safe(() => fs.readdirSync('/proc'), [] as string[])) {
    if (!/^\d+$/.test(entry) || ownPids.includes(Number(entry))) continue;
    const cmd = safe(() => fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim(), '');
    if (/\bjest\b|npm (run )?test|tsc\b/.test(cmd) && !found.includes(cmd.slice(0, 120))) found.push(cmd.slice(0, 120));
  }
  return found;
}

function safe<T>(fn: () => T, fallback: T): T {
  try {
    return fn();
  } catch {
    return fallback;
  }
}
