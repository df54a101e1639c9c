import { RECONCILE_RECHECK_MS } from '@app/generation';
import { MaintenanceScheduler } from './maintenance.scheduler';

/** Only the reconciler's cadence: the sweeps' first runs are a minute away and never come here. */
describe('MaintenanceScheduler: the reconciler pass cadence', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function scheduler(reports: ({ awaitingLocks: number } | null)[]) {
    const runExclusive = jest.fn(async () => reports.shift() ?? { awaitingLocks: 0 });
    const s = new MaintenanceScheduler(
      { runExclusive } as never,
      { sweep: jest.fn() } as never,
      { sweep: jest.fn() } as never,
      { list: jest.fn(async () => []) } as never,
      {} as never,
      { generator: { reconcileIntervalMs: 10_000 }, storage: { retentionDays: 30 } } as never,
    );
    return { s, runExclusive };
  }

  /** Lets the pass's promise chain settle, so its next timer is set. */
  const settle = async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };

  it("runs the next pass RECONCILE_RECHECK_MS after one that found tasks awaiting a dead worker's lock, else an interval after", async () => {
    const { s, runExclusive } = scheduler([{ awaitingLocks: 2 }, { awaitingLocks: 0 }, null]);
    jest.spyOn(s as never, 'noteOlderLayout' as never).mockImplementation((async () => undefined) as never);
    s.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(runExclusive).toHaveBeenCalledTimes(1);
    await settle();
    // Awaiting locks: the next pass comes sooner.
    await jest.advanceTimersByTimeAsync(RECONCILE_RECHECK_MS);
    expect(runExclusive).toHaveBeenCalledTimes(2);
    await settle();
    // Nothing awaited: a whole interval.
    await jest.advanceTimersByTimeAsync(RECONCILE_RECHECK_MS);
    expect(runExclusive).toHaveBeenCalledTimes(2);
    await jest.advanceTimersByTimeAsync(10_000 - RECONCILE_RECHECK_MS);
    expect(runExclusive).toHaveBeenCalledTimes(3);
    await settle();
    // Another replica's pass (null): an interval.
    await jest.advanceTimersByTimeAsync(RECONCILE_RECHECK_MS);
    expect(runExclusive).toHaveBeenCalledTimes(3);
    await s.onModuleDestroy();
  });
});
