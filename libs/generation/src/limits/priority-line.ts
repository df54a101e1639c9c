import { abortReason } from '@app/errors';

interface Waiter<T> {
  priority: number;
  order: number;
  resolve: (value: T) => void;
  reject: (reason: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/**
 * Waiters served by priority (lower first: the runner passes a task's seq), then in arrival order. A waiter
 * whose signal aborts leaves the line at once, so whatever is served next goes to a live one.
 * The line behind both PrioritySemaphore and ModelConcurrencyLimiter.
 */
export class PriorityLine<T> {
  private readonly waiters: Waiter<T>[] = [];
  private arrivals = 0;

  get length(): number {
    return this.waiters.length;
  }

  /** Settles with what `serve` hands this waiter; rejects with the signal's reason on abort. */
  join(priority = Number.MAX_SAFE_INTEGER, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = { priority, order: this.arrivals++, resolve, reject, signal };
      if (signal) {
        waiter.onAbort = () => {
          const i = this.waiters.indexOf(waiter);
          if (i !== -1) this.waiters.splice(i, 1);
          reject(abortReason(signal));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      let i = this.waiters.length;
      while (i > 0 && compare(this.waiters[i - 1], waiter) > 0) i--;
      this.waiters.splice(i, 0, waiter);
    });
  }

  /** Hands `make()` to the first waiter; false, without calling `make`, when nobody waits. */
  serve(make: () => T): boolean {
    const next = this.waiters.shift();
    if (!next) return false;
    this.detach(next);
    next.resolve(make());
    return true;
  }

  rejectAll(reason: unknown): void {
    for (const w of this.waiters.splice(0)) {
      this.detach(w);
      w.reject(reason);
    }
  }

  private detach(w: Waiter<T>): void {
    if (w.signal && w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
  }
}

function compare(a: { priority: number; order: number }, b: { priority: number; order: number }): number {
  return a.priority - b.priority || a.order - b.order;
}
