import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Job, Queue } from 'bull';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { BATCH_OPEN_SQL } from '@app/database';
import { RedisService } from '@app/redis';
import { BatchDeadlines, nextRenderJob, renderJobId, TASK_QUEUE, TaskStateStore } from '@app/tasks';
import { describeError } from '../running/task-failure';

export interface ReconcileReport {
  /** `queued` or stale `running` tasks without a live job (or with a dead one), given a job again. */
  reenqueued: number;
  /** Batches whose tasks were all terminal but which were never marked finished. */
  finishedBatches: number;
  /** Tasks cancelled and refunded because their batch's deadline passed before they were sent (BatchDeadlines). */
  deadlineCancelled: number;
  /**
   * Running tasks past their lease whose job is still `active` under a lock that missed its
   * renewal: a crashed generator's, back once the lock expires. The scheduler runs the next pass sooner (RECONCILE_RECHECK_MS) rather than a
   * whole interval after it: in a chaos run the lock expired 3-6 s after a pass and the tasks
   * waited the rest of the 10 s interval.
   */
  awaitingLocks: number;
}

/** The next pass comes this soon after one that found tasks awaiting a dead worker's lock. */
export const RECONCILE_RECHECK_MS = 2000;
/** How late a lock's renewal may be (an event loop's stall) before its worker counts as gone. */
const LOCK_RENEWAL_SLACK_MS = 1000;

/** Deletes the lock only if it still holds our token. */
const RELEASE_LOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/**
 * Job states in which Bull will still deliver the job (or is delivering it). An `active`
 * job is live only while its worker holds its lock (deadActive).
 */
const LIVE_STATES = new Set(['waiting', 'delayed', 'active', 'paused']);

const PASS_LIMIT = 500;

/**
 * Bull's maxStalledCount (its default, which Kiln keeps): a job whose worker died is handed
 * again once by Bull's own stalled-job recovery before Bull fails it.
 */
const STALLED_REDELIVERIES = 1;

/**
 * The jobs that may be running a `running` task: the one that claimed it (attempts - 1), or,
 * when Bull's stalled-job recovery handed that job again after a crash (a generator starting
 * up runs the check at once), an older one: each delivery bumps attempts but keeps the job's
 * id. Missing that job, a pass added another one for a task whose run was alive (waiting for
 * the model's slot past the lease), and the new job's takeover submitted a queue upstream's
 * request a third time (the landing CI's generator-queue-submit-doubt, bfl).
 */
function claimingJobIds(task: OrphanCandidate): string[] {
  const ids: string[] = [];
  for (let back = 1; back <= 1 + STALLED_REDELIVERIES && task.attempts - back >= 0; back++) {
    ids.push(renderJobId(task.id, task.attempts - back));
  }
  return ids;
}

interface OrphanCandidate {
  id: string;
  batch_id: string;
  seq: number;
  status: 'queued' | 'running';
  attempts: number;
}

/**
 * The safety net under the queue. The database is the source of truth and Redis may lose
 * jobs (flushed, a failed add, a job Bull gave up on after repeated stalls), so every pass
 * (`pending` tasks are the feeder's, QueueFeeder): gives a job again to `queued` tasks
 * whose job is gone and to `running` tasks whose worker is gone (untouched for a lease and
 * no live job; tasks waiting on a queue upstream are the pollers', UpstreamPoller, which
 * take over a dead generator's by their own leases); and settles batches whose tasks are all terminal but which were never
 * marked finished; and cancels the unsent tasks of batches past their deadline (BatchDeadlines).
 * Every action is idempotent (deterministic job ids, fenced updates), so a
 * pass racing the workers or another replica's pass does no harm; the Redis lock only
 * saves the work.
 *
 * A killed worker's jobs stay `active` in Bull until its stalled check has seen them
 * unlocked on two of its passes (one to 1.5 minutes with the defaults). The reconciler does
 * not wait for that: an `active` job whose lock is gone is dead, so it is removed and the
 * task's next job added, and the task runs again within the lock duration plus one pass
 * interval. Bull's own recovery then finds nothing to move, so the task is not run a third
 * time.
 */
@Injectable()
export class TaskReconcilerService {
  private readonly logger = new Logger(TaskReconcilerService.name);
  /** How long a `queued` task must sit before it counts as forgotten. */
  queuedGraceMs = 5000;
  /** Tasks (and batches) looked at per pass and kind; a backlog is walked over several passes. */
  passLimit = PASS_LIMIT;
  private queuedCursor: { updatedAt: string; id: string } | null = null;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly store: TaskStateStore,
    private readonly deadlines: BatchDeadlines,
    private readonly redis: RedisService,
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /** One pass, unless another replica is running one: then null. */
  async runExclusive(): Promise<ReconcileReport | null> {
    const key = this.redis.key('generator', 'reconciler-lock');
    const token = randomUUID();
    // No longer than one interval: a generator killed mid-pass must not hold off the others'
    // passes (and with them crash recovery) for longer. A slow pass overlapping the next
    // replica's is harmless.
    const ttl = Math.max(1000, this.config.generator.reconcileIntervalMs);
    const got = await this.redis.client.set(key, token, 'PX', ttl, 'NX');
    if (got !== 'OK') return null;
    try {
      return await this.reconcileOnce();
    } finally {
      await this.redis.client.eval(RELEASE_LOCK, 1, key, token).catch(() => undefined);
    }
  }

  async reconcileOnce(): Promise<ReconcileReport> {
    // Deadlines first: a task past its batch's deadline is cancelled, not given a job again.
    const deadlineCancelled = (await this.deadlines.sweep(this.passLimit)).tasks;
    const { reenqueued, awaitingLocks } = await this.reenqueueOrphans();
    const finishedBatches = await this.finishSettledBatches();
    const report = { reenqueued, finishedBatches, deadlineCancelled, awaitingLocks };
    if (reenqueued + finishedBatches + deadlineCancelled > 0) this.logger.log(`Reconciler: ${JSON.stringify(report)}`);
    return report;
  }

  /**
   * Running tasks past their lease first: they are a crashed generator's, with a bound to
   * keep (QUEUE_LOCK_DURATION_MS + RECONCILE_INTERVAL_MS). The queued page is the slower
   * safety net and is walked after them, with the tasks whose job waits undelivered left out
   * in one round trip (undelivered), so a backlog of hundreds no longer holds a pass (and the
   * next one, which starts an interval after it ends) for seconds of Redis round trips.
   */
  private async reenqueueOrphans(): Promise<{ reenqueued: number; awaitingLocks: number }> {
    const running: OrphanCandidate[] = await this.db.query(
      `SELECT id, batch_id, seq, status, attempts FROM tasks
        WHERE status = 'running' AND updated_at <= now() - ($1::int * interval '1 millisecond')
          AND upstream_poll_at IS NULL AND upstream_batch_id IS NULL
        ORDER BY updated_at LIMIT $2`,
      [this.config.generator.taskLeaseMs, this.passLimit],
    );
    const queued = await this.undelivered(await this.queuedPage());
    let added = 0;
    let awaitingLocks = 0;
    for (const task of [...running, ...queued]) {
      try {
        const outcome = await this.reenqueue(task);
        if (outcome === 'added') added++;
        else if (outcome === 'awaiting-lock') awaitingLocks++;
      } catch (err) {
        this.logger.warn(`Could not check or re-enqueue task ${task.id}: ${describeError(err)}`);
      }
    }
    return { reenqueued: added, awaitingLocks };
  }

  /**
   * The queued tasks whose job needs a closer look: those whose job is gone or was delivered.
   * A job that exists and was never delivered (no processedOn) is waiting, delayed or paused:
   * live, since Bull adds a job's hash and its place in a list in one script. One pipeline
   * for the whole page instead of a getJob and up to six state checks per task.
   */
  private async undelivered(tasks: OrphanCandidate[]): Promise<OrphanCandidate[]> {
    if (tasks.length === 0) return tasks;
    const pipeline = this.queue.client.pipeline();
    for (const t of tasks) pipeline.hget(this.queue.toKey(renderJobId(t.id, t.attempts)), 'processedOn');
    for (const t of tasks) pipeline.exists(this.queue.toKey(renderJobId(t.id, t.attempts)));
    const answers = (await pipeline.exec()) ?? [];
    if (answers.some(([err]) => err)) return tasks;
    return tasks.filter((_, i) => {
      const delivered = answers[i][1] !== null;
      const exists = answers[tasks.length + i][1] === 1;
      return !exists || delivered;
    });
  }

  /**
   * The next page of `queued` tasks past the grace period. A backlog can hold far more
   * queued tasks than one pass looks at, most of them with live jobs, so passes walk it
   * with a cursor and start over at the end, rather than re-checking the same oldest ones.
   */
  private async queuedPage(): Promise<OrphanCandidate[]> {
    const after = this.queuedCursor;
    // The cursor's time travels as text: a JS Date would drop the microseconds, and one
    // dispatch gives a whole batch the same updated_at.
    const rows: (OrphanCandidate & { updated_at_text: string })[] = await this.db.query(
      `SELECT id, batch_id, seq, status, attempts, updated_at::text AS updated_at_text FROM tasks
        WHERE status = 'queued' AND tier = 'standard' AND updated_at <= now() - ($1::int * interval '1 millisecond')
          AND ($2::timestamptz IS NULL OR (updated_at, id) > ($2::timestamptz, $3::uuid))
        ORDER BY updated_at, id LIMIT $4`,
      [this.queuedGraceMs, after?.updatedAt ?? null, after?.id ?? null, this.passLimit],
    );
    const last = rows[rows.length - 1];
    this.queuedCursor = rows.length === this.passLimit && last ? { updatedAt: last.updated_at_text, id: last.id } : null;
    return rows;
  }

  /**
   * A queued task's job is the one for its next attempt; a running task's is the one that
   * claimed it (or, after a failed give-back, the next one). When none is live, the job for
   * the next attempt is (re)added; a running task's new job takes it over when delivered.
   * A dead `active` job (deadActive) is removed first; Bull removes only an unlocked job, so
   * one a worker has just taken meanwhile stays, and the task is left to it.
   */
  private async reenqueue(task: OrphanCandidate): Promise<'added' | 'live' | 'awaiting-lock'> {
    const next = renderJobId(task.id, task.attempts);
    const candidates = task.status === 'running' ? [...claimingJobIds(task), next] : [next];
    for (const id of candidates) {
      const job = await this.queue.getJob(id);
      if (!job) continue;
      const state = await job.getState();
      if (state === 'active' && (await this.deadActive(job))) {
        if (!(await this.removeDead(job))) return 'live';
        continue;
      }
      // A running task past its lease whose job is still active: a dead worker's, awaiting its
      // lock's expiry, when the lock is overdue for renewal; else a live one, a slow render.
      if (state === 'active' && task.status === 'running') return (await this.lockOverdue(job)) ? 'awaiting-lock' : 'live';
      if (LIVE_STATES.has(state)) return 'live';
    }
    const stale = await this.queue.getJob(next);
    if (stale) await stale.remove();
    const job = nextRenderJob({ id: task.id, attempts: task.attempts, batchId: task.batch_id, seq: task.seq });
    // At the front of the queue (lifo: the next job a worker takes): at the back it waited
    // behind the whole backlog, 40 s in the chaos run's timelines (issue 46 item 3).
    await this.queue.add(job.name, job.data, { ...job.opts, lifo: true });
    return 'added';
  }

  /**
   * An `active` job whose worker is gone: its lock (renewed every half lock duration while
   * the worker lives) has expired. Bull moves a job into `active` a moment before it takes
   * the lock, so a job counts as dead only once it was delivered (processedOn) at least a
   * lock duration ago; a redelivery caught in that moment could still run twice, which the
   * fenced task writes make harmless.
   */
  private async deadActive(job: Job): Promise<boolean> {
    const deliveredAt = job.processedOn;
    if (!deliveredAt || Date.now() - deliveredAt < this.config.generator.lockDurationMs) return false;
    return (await this.queue.client.exists(job.lockKey())) === 0;
  }

  /**
   * Whether an active job's lock has missed its renewal: a live worker renews it every half
   * lock duration (to a whole one), so its time to live stays above half; below that by more
   * than a second, its worker is most likely gone and the lock about to expire. A render slower
   * than TASK_LEASE_MS (untouched rows are past their lease) keeps its lock renewed: not counted,
   * so it never makes the passes come sooner.
   */
  private async lockOverdue(job: Job): Promise<boolean> {
    const ttl = await this.queue.client.pttl(job.lockKey());
    return ttl >= 0 && ttl < this.config.generator.lockDurationMs / 2 - LOCK_RENEWAL_SLACK_MS;
  }

  /** False when a worker holds the job's lock after all (Bull refuses to remove it). */
  private async removeDead(job: Job): Promise<boolean> {
    try {
      await job.remove();
      this.logger.debug(`Removed job ${job.id}: its worker's lock expired (a crashed generator)`);
      return true;
    } catch (err) {
      if (/Could not remove job/.test((err as Error).message)) return false;
      throw err;
    }
  }

  private async finishSettledBatches(): Promise<number> {
    const rows: { id: string }[] = await this.db.query(
      `SELECT b.id FROM batches b
        WHERE b.${BATCH_OPEN_SQL}
          AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.batch_id = b.id AND t.status IN ('pending', 'queued', 'running'))
          AND EXISTS (SELECT 1 FROM tasks t WHERE t.batch_id = b.id)
        LIMIT $1`,
      [this.passLimit],
    );
    let finished = 0;
    for (const { id } of rows) {
      if (await this.store.finishFromTasks(id)) finished++;
    }
    return finished;
  }
}
