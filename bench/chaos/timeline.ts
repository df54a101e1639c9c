import Redis from 'ioredis';
import { Pool } from 'pg';
import { round } from '../lib/util';

/** Tasks traced per fault: enough to see what holds them, few enough to read. */
const TRACED_PER_FAULT = 3;
/** Kiln's defaults the timeline names (libs/config): a running task untouched this long is the reconciler's. */
const TASK_LEASE_MS = 15_000;
const LOCK_DURATION_MS = 20_000;

interface Traced {
  fault: number;
  faultLabel: string;
  taskId: string;
  attempts: number;
  /** When the fault ended (ms epoch): the timeline's zero. */
  healedAt: number;
  events: { at: number; state: string }[];
  last: string;
  doneAt: number | null;
}

/**
 * Timelines of stranded tasks (issue 46 item 3): for a few tasks a fault left `running` on
 * the same attempt, what stood in the way of their next attempt, sampled every monitor tick
 * from the fault's end until the task runs again or ends: the task's row (status, attempt,
 * time since it was last touched against TASK_LEASE_MS), the Bull jobs of its attempt and of
 * the next (state, whether its worker's lock is held, its age against QUEUE_LOCK_DURATION_MS),
 * and whether a reconciler pass holds the reconciler's lock. Each change is one line.
 */
export class StrandedTracer {
  readonly traced: Traced[] = [];
  private readonly redis: Redis;
  private readonly bull: string;
  private readonly reconcilerLock: string;

  constructor(
    private readonly db: Pool,
    redisUrl: string,
    redisPrefix: string,
  ) {
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: 0, commandTimeout: 1000, lazyConnect: true, enableOfflineQueue: false });
    this.redis.on('error', () => undefined);
    this.bull = `${redisPrefix}:bull:kiln-tasks`;
    this.reconcilerLock = `${redisPrefix}:generator:reconciler-lock`;
  }

  async start(): Promise<void> {
    await this.redis.connect().catch(() => undefined);
  }

  stop(): void {
    this.redis.disconnect();
  }

  trace(fault: number, faultLabel: string, healedAt: number, tasks: { id: string; attempts: number }[]): void {
    for (const t of tasks.slice(0, TRACED_PER_FAULT)) {
      this.traced.push({ fault, faultLabel, taskId: t.id, attempts: t.attempts, healedAt, events: [], last: '', doneAt: null });
    }
  }

  async tick(): Promise<void> {
    for (const t of this.traced.filter((x) => x.doneAt === null)) {
      const state = await this.sample(t);
      if (state === null) continue;
      const now = Date.now();
      if (state.text !== t.last) {
        t.events.push({ at: now, state: state.text });
        t.last = state.text;
      }
      if (state.moved) t.doneAt = now;
    }
  }

  private async sample(t: Traced): Promise<{ text: string; moved: boolean } | null> {
    const { rows } = await this.db.query<{ status: string; attempts: number; age_ms: number; waiting_upstream: boolean }>(
      `SELECT status, attempts, (extract(epoch FROM now() - updated_at) * 1000)::int AS age_ms,
              upstream_poll_at IS NOT NULL AS waiting_upstream
         FROM tasks WHERE id = $1`,
      [t.taskId],
    );
    const row = rows[0];
    if (!row) return null;
    const moved = row.status !== 'running' || row.attempts !== t.attempts;
    const parts = [
      `${row.status} attempt ${row.attempts}${row.waiting_upstream ? ' (waiting upstream)' : ''}, ` +
        (row.status === 'running' ? (row.age_ms >= TASK_LEASE_MS ? 'lease expired' : 'within its lease') : 'settled or queued'),
    ];
    for (const attempt of [t.attempts - 1, t.attempts]) parts.push(await this.job(t.taskId, attempt));
    parts.push(await this.reconciler());
    return { text: parts.join('; '), moved };
  }

  /** The Bull job of `attemptsSoFar` (renderJobId): where it stands, its lock, its age. */
  private async job(taskId: string, attemptsSoFar: number): Promise<string> {
    const id = attemptsSoFar <= 0 ? taskId : `${taskId}-attempt${attemptsSoFar + 1}`;
    const label = `job ${attemptsSoFar + 1}`;
    try {
      const key = `${this.bull}:${id}`;
      const [processedOn, lock, active, wait, delayed] = await Promise.all([
        this.redis.hget(key, 'processedOn'),
        this.redis.exists(`${key}:lock`),
        this.redis.call('LPOS', `${this.bull}:active`, id) as Promise<number | null>,
        this.redis.call('LPOS', `${this.bull}:wait`, id) as Promise<number | null>,
        this.redis.zscore(`${this.bull}:delayed`, id),
      ]);
      const exists = await this.redis.exists(key);
      // Bull pushes new jobs at the list's head and workers take from its tail: ahead = those nearer the tail.
      const ahead = wait === null ? null : (await this.redis.llen(`${this.bull}:wait`)) - wait - 1;
      if (!exists) return `${label} none`;
      const where =
        active !== null
          ? 'active'
          : wait !== null
            ? `waiting (${ahead} ahead)`
            : delayed !== null
              ? 'delayed'
              : 'neither waiting nor active';
      const age = processedOn ? Date.now() - Number(processedOn) : null;
      const lockText =
        where === 'active'
          ? lock
            ? ', locked'
            : `, lock gone${age !== null && age < LOCK_DURATION_MS ? ' (delivered < lock duration ago)' : ''}`
          : '';
      return `${label} ${where}${lockText}`;
    } catch {
      return `${label} unknown (Redis not answering)`;
    }
  }

  private async reconciler(): Promise<string> {
    try {
      return (await this.redis.exists(this.reconcilerLock)) ? 'reconciler pass running' : 'no reconciler pass';
    } catch {
      return 'reconciler unknown';
    }
  }

  /** The timelines as markdown, times in seconds from the fault's end. */
  render(): string {
    if (this.traced.length === 0) return '';
    const lines = [
      '### Stranded tasks: timelines',
      '',
      "Seconds from the fault's end; one line per change of what was sampled every 0.5 s.",
      '',
    ];
    for (const t of this.traced) {
      const end = t.doneAt === null ? 'not run again while traced' : `ran again at ${round((t.doneAt - t.healedAt) / 1000, 1)} s`;
      lines.push(`- fault ${t.fault} (${t.faultLabel}), task ${t.taskId} (attempt ${t.attempts}): ${end}`);
      for (const e of t.events) lines.push(`  - ${round((e.at - t.healedAt) / 1000, 1)} s: ${e.state}`);
    }
    lines.push('');
    return lines.join('\n');
  }
}
