import { abortReason } from '@app/errors';
import { PriorityLine } from './priority-line';

/**
 * A counting semaphore whose waiters are served by priority (lower first), then
 * in arrival order. Used for CPU-bound work: a small batch's task that arrives while a big
 * batch's tasks wait for a core goes ahead of them, as it would in the queue.
 */
export class PrioritySemaphore {
  private available: number;
  private readonly line = new PriorityLine<() => void>();

  constructor(readonly permits: number) {
    this.available = Math.max(1, Math.floor(permits));
  }

  get waiting(): number {
    return this.line.length;
  }

  get inUse(): number {
    return Math.max(1, Math.floor(this.permits)) - this.available;
  }

  /** Resolves with a release function (idempotent); rejects with the signal's reason on abort. */
  acquire(priority = Number.MAX_SAFE_INTEGER, signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (this.available > 0 && this.line.length === 0) {
      this.available--;
      return Promise.resolve(this.releaser());
    }
    return this.line.join(priority, signal);
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
      if (!this.line.serve(() => this.releaser())) this.available++;
    };
  }
}
