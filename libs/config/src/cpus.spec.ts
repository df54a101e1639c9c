import { availableCpus, cgroupCpuQuota } from './cpus';

/** A fake /sys/fs/cgroup: the files given exist, every other read fails as on a host without them. */
const files = (entries: Record<string, string>) => (file: string) => {
  if (file in entries) return entries[file];
  throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
};

describe('availableCpus', () => {
  it('caps the cores by a cgroup v2 quota, rounded up (--cpus 0.5 -> 1, --cpus 1.5 -> 2)', () => {
    expect(availableCpus(8, files({ '/sys/fs/cgroup/cpu.max': '50000 100000\n' }))).toBe(1);
    expect(availableCpus(8, files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }))).toBe(2);
  });

  it('keeps the cores when the quota is larger or there is none', () => {
    expect(availableCpus(2, files({ '/sys/fs/cgroup/cpu.max': '800000 100000\n' }))).toBe(2);
    expect(availableCpus(4, files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBe(4);
    expect(availableCpus(4, files({}))).toBe(4);
  });

  it('reads cgroup v1 quota files, where -1 means none', () => {
    const v1 = (quota: string) =>
      files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': `${quota}\n`, '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000\n' });
    expect(cgroupCpuQuota(v1('200000'))).toBe(2);
    expect(availableCpus(16, v1('300000'))).toBe(3);
    expect(cgroupCpuQuota(v1('-1'))).toBeNull();
  });
});
