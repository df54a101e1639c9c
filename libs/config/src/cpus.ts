import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

type ReadFile = (file: string) => string;

const readText: ReadFile = (file) => readFileSync(file, 'utf8');

/**
 * The CPUs this process may really use: the host's cores (os.availableParallelism, which
 * honours the affinity mask) capped by the cgroup CPU quota, rounded up. A container started
 * with `--cpus 0.5` sees every host core in os.availableParallelism; only the quota says 0.5.
 * cgroup v2 keeps it in /sys/fs/cgroup/cpu.max (`<quota> <period>` or `max <period>`),
 * cgroup v1 in cpu.cfs_quota_us and cpu.cfs_period_us (-1: no quota).
 */
export function availableCpus(cores: number = availableParallelism(), readFile: ReadFile = readText): number {
  const quota = cgroupCpuQuota(readFile);
  const limit = quota === null ? cores : Math.min(cores, Math.ceil(quota));
  return Math.max(1, limit);
}

/** The quota in CPUs, or null when there is none (or no cgroup file to read). */
export function cgroupCpuQuota(readFile: ReadFile = readText): number | null {
  const v2 = tryRead(readFile, '/sys/fs/cgroup/cpu.max');
  if (v2 !== null) {
    const [quota, period] = v2.trim().split(/\s+/);
    return ratio(quota, period);
  }
  const quota =
    tryRead(readFile, '/sys/fs/cgroup/cpu/cpu.cfs_quota_us') ?? tryRead(readFile, '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us');
  const period =
    tryRead(readFile, '/sys/fs/cgroup/cpu/cpu.cfs_period_us') ?? tryRead(readFile, '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us');
  return quota === null || period === null ? null : ratio(quota.trim(), period.trim());
}

function ratio(quota: string | undefined, period: string | undefined): number | null {
  const q = Number(quota);
  const p = Number(period);
  if (quota === 'max' || !Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return null;
  return q / p;
}

function tryRead(readFile: ReadFile, file: string): string | null {
  try {
    return readFile(file);
  } catch {
    return null;
  }
}
