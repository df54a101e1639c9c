/**
 * Turns a provider's progress callbacks into at most one database write per interval per
 * task. The clock starts at the claim, so a task that finishes within the first interval
 * writes no progress at all (its terminal write says 100), and every report waits at least
 * `settleMs`, so a render that ends right after its last report (most do: providers report
 * 70 on their way out) writes only its terminal state, not a progress row a moment before
 * it. Writes are fire-and-forget:
 * progress is decoration, and a lost write is corrected by the next one or the terminal one.
 */
export class ProgressReporter {
  private latest = 0;
  private written = 0;
  private lastWriteAt: number;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly write: (pct: number) => Promise<unknown> | void,
    private readonly minIntervalMs = 500,
    private readonly settleMs = 250,
    private readonly now: () => number = Date.now,
  ) {
    this.lastWriteAt = now();
  }

  /** Any number; stored as 1..99 (0 is queued, 100 is succeeded), only ever increasing. */
  report(pct: number): void {
    if (this.stopped || !Number.isFinite(pct)) return;
    const value = Math.min(99, Math.max(1, Math.round(pct)));
    if (value <= this.latest) return;
    this.latest = value;
    if (this.timer) return;
    const wait = Math.max(this.settleMs, this.lastWriteAt + this.minIntervalMs - this.now());
    this.timer = setTimeout(() => this.flush(), wait);
    this.timer.unref?.();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private flush(): void {
    this.timer = undefined;
    if (this.stopped || this.latest <= this.written) return;
    this.written = this.latest;
    this.lastWriteAt = this.now();
    try {
      const pending = this.write(this.latest);
      if (pending && typeof pending.catch === 'function') pending.catch(() => undefined);
    } catch {
      // see the class comment
    }
  }
}
