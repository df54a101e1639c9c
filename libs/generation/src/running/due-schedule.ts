/**
 * A min-heap of items by due time: the poller's schedule. Push and pop are O(log n), so
 * thousands of waiting requests cost a few comparisons per poll, not a scan.
 */
export class DueSchedule<T> {
  private readonly heap: { at: number; item: T }[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(at: number, item: T): void {
    const heap = this.heap;
    heap.push({ at, item });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent].at <= heap[i].at) break;
      [heap[parent], heap[i]] = [heap[i], heap[parent]];
      i = parent;
    }
  }

  /** When the soonest item is due; Infinity when empty. */
  peekAt(): number {
    return this.heap.length > 0 ? this.heap[0].at : Infinity;
  }

  /** The soonest item if it is due by `now`, else undefined. */
  popDue(now: number): T | undefined {
    const heap = this.heap;
    if (heap.length === 0 || heap[0].at > now) return undefined;
    const top = heap[0].item;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let smallest = i;
        if (l < heap.length && heap[l].at < heap[smallest].at) smallest = l;
        if (r < heap.length && heap[r].at < heap[smallest].at) smallest = r;
        if (smallest === i) break;
        [heap[smallest], heap[i]] = [heap[i], heap[smallest]];
        i = smallest;
      }
    }
    return top;
  }

  clear(): void {
    this.heap.length = 0;
  }
}
