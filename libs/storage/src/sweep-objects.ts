import { StorageDriver } from './storage.driver';
import { ObjectKeyPrefix } from './storage.keys';

/** A row whose object a sweep removes; `key` null when there is no object to remove. */
export interface SweptRow {
  id: string;
  key: string | null;
}

export interface SweepResult {
  /** Rows whose objects were removed and which `forget` then cleared. */
  swept: number;
  /** Objects storage refused in the chunk the sweep stopped at (0 when it finished). */
  failed: number;
  /** The first refusal, for the caller's log. */
  failure?: unknown;
}

/**
 * Removes expired objects chunk by chunk: `next` reads up to `chunk` rows still to sweep,
 * their objects are removed, and `forget` clears the rows whose removal succeeded, so `next`
 * no longer finds them. Objects go first and rows second: a crash midway leaves rows the
 * next sweep retries, never objects nothing points to. Stops at the first chunk storage
 * refuses part of, rather than spin on the same rows; the next sweep retries them.
 */
export async function sweepObjects(
  storage: StorageDriver,
  chunk: number,
  next: () => Promise<SweptRow[]>,
  forget: (ids: string[]) => Promise<unknown>,
): Promise<SweepResult> {
  let swept = 0;
  for (;;) {
    const rows = await next();
    if (rows.length === 0) return { swept, failed: 0 };
    const removals = await Promise.allSettled(rows.map(async (row) => (row.key ? storage.remove(row.key) : undefined)));
    const removed = rows.filter((_, i) => removals[i].status === 'fulfilled').map((row) => row.id);
    if (removed.length > 0) await forget(removed);
    swept += removed.length;
    if (removed.length < rows.length) {
      const failure: unknown = removals.find((r): r is PromiseRejectedResult => r.status === 'rejected')?.reason;
      return { swept, failed: rows.length - removed.length, failure };
    }
    if (rows.length < chunk) return { swept, failed: 0 };
  }
}

export interface UnreferencedSweep {
  prefix: ObjectKeyPrefix;
  /** Only objects last written before this are candidates (a grace period for runs in flight). */
  olderThan: Date;
  /** Which of these keys something still needs; the others are removed. */
  referenced: (keys: string[]) => Promise<Set<string>>;
  chunk: number;
}

/**
 * Removes the objects under a prefix that nothing references: what a crash between storing
 * an object and recording it leaves behind. Candidates are looked up `chunk` at a time while
 * the listing runs. Returns how many were removed; a removal storage refuses is left for the
 * next sweep.
 */
export async function sweepUnreferenced(storage: StorageDriver, sweep: UnreferencedSweep): Promise<number> {
  let removed = 0;
  let candidates: string[] = [];
  const flush = async (): Promise<void> => {
    const keys = candidates;
    candidates = [];
    const keep = await sweep.referenced(keys);
    const removals = await Promise.allSettled(keys.filter((key) => !keep.has(key)).map((key) => storage.remove(key)));
    removed += removals.filter((r) => r.status === 'fulfilled').length;
  };
  for await (const object of storage.list(sweep.prefix)) {
    if (object.lastModified >= sweep.olderThan) continue;
    candidates.push(object.key);
    if (candidates.length >= sweep.chunk) await flush();
  }
  if (candidates.length > 0) await flush();
  return removed;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** What was made before this moment is past a retention of `retentionDays` at `now`. */
export function retentionCutoff(retentionDays: number, now: Date): Date {
  return new Date(now.getTime() - retentionDays * DAY_MS);
}
