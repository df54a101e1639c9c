import { invalidRequest } from '@app/errors';

/**
 * Where a progress stream (GET /v1/batches/{id}/events) stands: the batch version of the last
 * batch event sent, and the positions (seq) of the tasks whose final event was sent. Both come
 * from the database, never from the process that sent them: a task's final status never
 * changes, so "the finished tasks not in this set" is exactly what a client has not seen,
 * whichever api process it reconnects to. Tasks finish roughly in order, so the set is kept
 * as ranges ("0-811,815"): a handful of them while a batch runs, one when it is done. The
 * done batch event's id says so (";done"), so a client resuming after it is told there is
 * nothing more, even if the batch row changed since (its expiry, say).
 */
export class EventCursor {
  private constructor(
    /** The version of the last batch event sent; -1 before the first. */
    readonly version: number,
    /** Sorted, disjoint, non-adjacent inclusive ranges of seq. */
    private readonly ranges: readonly (readonly [number, number])[],
    /** The last batch event sent said done. */
    readonly done = false,
  ) {}

  static readonly start = new EventCursor(-1, []);

  /** `<version>:<ranges>`, the SSE event id. */
  get id(): string {
    const ranges = this.ranges.map(([lo, hi]) => (lo === hi ? `${lo}` : `${lo}-${hi}`)).join(',');
    return `${this.version}:${ranges}${this.done ? ';done' : ''}`;
  }

  /** The lowest seq not seen: every task below it was sent. */
  get lowestUnseen(): number {
    return this.ranges.length > 0 && this.ranges[0][0] === 0 ? this.ranges[0][1] + 1 : 0;
  }

  /** The ranges as two arrays (for unnest in SQL). */
  get bounds(): { lows: number[]; highs: number[] } {
    return { lows: this.ranges.map((r) => r[0]), highs: this.ranges.map((r) => r[1]) };
  }

  has(seq: number): boolean {
    return this.ranges.some(([lo, hi]) => seq >= lo && seq <= hi);
  }

  withVersion(version: number, done: boolean): EventCursor {
    return new EventCursor(version, this.ranges, done);
  }

  /** The cursor with one more task seen, ranges merged. */
  withTask(seq: number): EventCursor {
    if (this.has(seq)) return this;
    const merged: [number, number][] = [];
    let placed: [number, number] = [seq, seq];
    for (const [lo, hi] of this.ranges) {
      if (hi + 1 < placed[0]) merged.push([lo, hi]);
      else if (lo - 1 > placed[1]) {
        merged.push(placed);
        placed = [lo, hi];
      } else placed = [Math.min(lo, placed[0]), Math.max(hi, placed[1])];
    }
    merged.push(placed);
    return new EventCursor(this.version, merged, this.done);
  }

  /** A Last-Event-ID header as a cursor; a malformed one is refused (400), never guessed at. */
  static parse(header: string, maxSeq: number): EventCursor {
    const bad = () => invalidRequest('Last-Event-ID', 'malformed', 'Last-Event-ID is not an event id this stream sent');
    const m = /^(-1|\d{1,15}):((?:\d{1,6}(?:-\d{1,6})?)(?:,\d{1,6}(?:-\d{1,6})?)*)?(;done)?$/.exec(header.trim());
    if (!m) throw bad();
    const ranges: [number, number][] = (m[2] ? m[2].split(',') : []).map((part) => {
      const [lo, hi = lo] = part.split('-').map(Number);
      return [lo, hi];
    });
    if (ranges.some(([lo, hi]) => hi < lo || hi > maxSeq)) throw bad();
    // Ranges as sent are already merged; merging again keeps a hand-written id honest.
    ranges.sort((a, b) => a[0] - b[0]);
    const merged: [number, number][] = [];
    for (const [lo, hi] of ranges) {
      const last = merged.at(-1);
      if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
      else merged.push([lo, hi]);
    }
    return new EventCursor(Number(m[1]), merged, m[3] !== undefined);
  }
}
