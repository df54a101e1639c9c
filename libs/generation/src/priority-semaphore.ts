interface Waiter {
  priority: number;
  order: number;
  resolve: (release: () => void) => void;
  reject: (reason: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/**
 * A counting semaphore whose waiters are served by priority (lower first, as Bull's), then
 * in arrival order. Used for CPU-bound work: a small batch's task that arrives while a big
 * batch's tasks wait for a core goes ahead of them, as it would in the queue.
 */
export class PrioritySemaphore {
  private available: number;
  private readonly waiters: Waiter[] = [];
  private arrivals = 0;

  constructor(readonly permits: number) {
    this.available = Math.max(1, Math.floor(permits));
  }

  get waiting(): number {
    return this.waiters.length;
  }

  get inUse(): number {
    return Math.max(1, Math.floor(this.permits)) - this.available;
  }

  /** Resolves with a release function (idempotent); rejects with the signal's reason on abort. */
  acquire(priority = Number.MAX_SAFE_INTEGER, signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.available > 0 && this.waiters.length === 0) {
      this.available--;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { priority, order: this.arrivals++, resolve, reject, signal };
      if (signal) {
        waiter.onAbort = () => {
          const i = this.waiters.indexOf(waiter);
          if (i !== -1) this.waiters.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      let i = this.waiters.length;
      while (i > 0 && compare(this.waiters[i - 1], waiter) > 0) i--;
      this.waiters.splice(i, 0, waiter);
    });
  }

  async use<T>(priority: number | undefined, signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
    const release = await this.acquire(priority, signal);
    try {
      return await work();
    } finally {
      release();
    }
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (!next) {
        this.available++;
        return;
      }
      if (next.signal && next.onAbort) next.signal.removeEventListener('abort', next.onAbort);
      next.resolve(this.releaser());
    };
  }
}

function compare(a: Waiter, b: Waiter): number {
  return a.priority - b.priority || a.order - b.order;
}
