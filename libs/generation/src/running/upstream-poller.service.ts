import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { DEFAULT_MAX_WAIT_MS, ProviderError, QueueImageProvider, UpstreamPoll, UpstreamSubmission } from '@app/providers';
import { ClaimedTask, Fence, UpstreamWaitStore, WaitHold } from '@app/tasks';
import { DueSchedule } from './due-schedule';
import { ProviderRegistry } from './provider-registry';
import { describeError, TaskFailure } from './task-failure';

/** A task waiting on its queue upstream, in this generator's poller. */
export interface WaitingTask {
  claim: ClaimedTask;
  fence: Fence;
  submission: UpstreamSubmission;
  provider: QueueImageProvider;
  submittedAt: number;
  /** Handed to the runner to collect its image: still held (and its lease renewed), no longer polled. */
  collecting?: boolean;
}

/** What the poller hands back: a made image to collect, or the request's failure (or one of Kiln's). */
export interface WaitingTaskHandlers {
  done(task: WaitingTask, done: Extract<UpstreamPoll, { state: 'done' }>): void;
  failed(task: WaitingTask | { claim: ClaimedTask; fence: Fence }, err: unknown): void;
}

/** Polls in flight at once, whatever the number waiting: each is a small GET. */
const POLL_CONCURRENCY = 64;
/** How often the schedule is looked at: the finest poll timing the poller keeps. */
const TICK_MS = 50;
/** How often free waiting tasks (new, released, or a dead poller's) are looked for in PostgreSQL. */
const FETCH_INTERVAL_MS = 1000;

/**
 * The generator's poller for tasks waiting on queue upstreams (the queue types'): while
 * the upstream makes the image, the task holds no worker of GENERATOR_CONCURRENCY and no model
 * slot, only an entry in this bounded schedule (UPSTREAM_POLLER_CAPACITY), fed by the workers
 * that submit and from PostgreSQL rows in the waiting state no poller holds. Each request is
 * polled at its route's interval (never more often: the next poll is scheduled from the end
 * of the last); a made image or a failure goes back to the runner (handlers).
 *
 * Leases make it safe across generators: this poller holds its tasks until its lease runs
 * out (UPSTREAM_LEASE_MS, renewed at a third of it), so a dead generator's tasks are taken
 * over by another's poller; at a shutdown it gives them back at once.
 */
@Injectable()
export class UpstreamPoller {
  private readonly logger = new Logger(UpstreamPoller.name);
  /** This process's poller, as written on the tasks it holds. */
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly waiting = new Map<string, WaitingTask>();
  private readonly schedule = new DueSchedule<WaitingTask>();
  /** Renewals that did not find a held task: dropped at the second, as another holds it now. */
  private readonly missed = new Map<string, number>();
  private handlers: WaitingTaskHandlers | null = null;
  private timers: NodeJS.Timeout[] = [];
  private polling = 0;
  private fetching = false;
  private renewing = false;
  private stopped = true;
  private readonly pollsAbort = new AbortController();
  /** Every poll sent (the bench reads it: polls per task per interval). */
  pollsSent = 0;

  constructor(
    private readonly store: UpstreamWaitStore,
    private readonly providers: ProviderRegistry,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  get size(): number {
    return this.waiting.size;
  }

  /** Where a task the upstream just accepted goes: to this poller if it has room, else to PostgreSQL for any poller. */
  hold(pollAt: Date): WaitHold {
    const room = !this.stopped && this.waiting.size < this.config.generator.upstreamPollerCapacity;
    return { poller: room ? this.id : null, leaseMs: this.config.generator.upstreamLeaseMs, pollAt };
  }

  /** A task recorded (or resumed) under this poller's hold. */
  adopt(task: WaitingTask, pollAt: number): void {
    const known = this.waiting.get(task.claim.id);
    if (known && known.fence.attempt >= task.fence.attempt) return;
    this.waiting.set(task.claim.id, task);
    this.missed.delete(task.claim.id);
    this.schedule.push(pollAt, task);
  }

  start(handlers: WaitingTaskHandlers): void {
    this.handlers = handlers;
    this.stopped = false;
    const every = (ms: number, fn: () => void) => {
      const timer = setInterval(fn, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(TICK_MS, () => this.tick());
    every(FETCH_INTERVAL_MS, () => void this.fetch());
    every(Math.max(200, Math.floor(this.config.generator.upstreamLeaseMs / 3)), () => void this.renew());
    void this.fetch();
  }

  /** Stops polling (polls in flight are aborted): nothing more is handed back. */
  async pause(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    this.pollsAbort.abort(new Error('The poller is stopping'));
    const waitedUntil = Date.now() + 5000;
    while ((this.polling > 0 || this.fetching || this.renewing) && Date.now() < waitedUntil) await new Promise((r) => setTimeout(r, 20));
  }

  /**
   * Gives every held task back, to be taken by the next poller at once (after pause, and
   * after the runner's drain: images being collected are the runner's).
   */
  async releaseAll(): Promise<number> {
    await this.pause();
    this.waiting.clear();
    this.schedule.clear();
    try {
      return await this.store.release(this.id, new Date());
    } catch (err) {
      this.logger.warn(`Could not give back the waiting tasks (${describeError(err)}); they are taken over when the lease runs out`);
      return 0;
    }
  }

  private tick(): void {
    const now = Date.now();
    while (this.polling < POLL_CONCURRENCY) {
      const task = this.schedule.popDue(now);
      if (!task) return;
      // A stale entry: the task left this poller (collected, taken back) or was re-adopted.
      if (this.waiting.get(task.claim.id) !== task) continue;
      void this.pollOne(task);
    }
  }

  private async pollOne(task: WaitingTask): Promise<void> {
    this.polling++;
    const startedAt = Date.now();
    try {
      this.pollsSent++;
      const polled = await task.provider.poll(task.submission, this.pollsAbort.signal);
      if (this.stopped || this.waiting.get(task.claim.id) !== task) return;
      if (polled.state === 'done') {
        task.collecting = true;
        this.handlers?.done(task, polled);
      } else if (polled.state === 'failed') {
        this.leave(task);
        this.handlers?.failed(task, polled.error);
      } else if (Date.now() - task.submittedAt > (task.provider.maxWaitMs ?? DEFAULT_MAX_WAIT_MS)) {
        this.leave(task);
        const minutes = Math.round((task.provider.maxWaitMs ?? DEFAULT_MAX_WAIT_MS) / 60_000);
        this.handlers?.failed(
          task,
          new ProviderError('timeout', `The upstream did not make the image within ${minutes} min`, { retryable: false }),
        );
      } else {
        this.schedule.push(startedAt + Math.max(task.provider.pollIntervalMs, polled.retryAfterMs ?? 0), task);
      }
    } catch (err) {
      if (this.stopped) return;
      // A bug, not the upstream (providers answer their trouble as waiting or failed): poll again later.
      this.logger.warn(`Polling task ${task.claim.id} failed: ${describeError(err)}`);
      if (this.waiting.get(task.claim.id) === task) this.schedule.push(Date.now() + task.provider.pollIntervalMs, task);
    } finally {
      this.polling--;
    }
  }

  /** The runner is done with a task it collected (recorded, retried or failed). */
  collected(task: WaitingTask): void {
    if (this.waiting.get(task.claim.id) === task) this.leave(task);
  }

  private leave(task: WaitingTask): void {
    this.waiting.delete(task.claim.id);
    this.missed.delete(task.claim.id);
  }

  /** Takes free waiting tasks from PostgreSQL while there is room. */
  private async fetch(): Promise<void> {
    if (this.stopped || this.fetching) return;
    const room = this.config.generator.upstreamPollerCapacity - this.waiting.size;
    if (room <= 0) return;
    this.fetching = true;
    try {
      const leased = await this.store.lease(this.id, this.config.generator.upstreamLeaseMs, Math.min(room, 1000));
      for (const row of leased) this.adoptLeased(row);
    } catch (err) {
      this.logger.warn(`Could not look for waiting tasks: ${describeError(err)}`);
    } finally {
      this.fetching = false;
    }
  }

  private adoptLeased(row: ClaimedTask & { pollAt: Date }): void {
    const { pollAt, ...claim } = row;
    const fence: Fence = { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId };
    try {
      if (!claim.batch || !claim.upstream) throw new TaskFailure('The task waiting upstream has lost its batch', 'internal');
      const provider = this.providers.forQueueRoute(claim.batch.provider);
      if (!provider) throw new TaskFailure("The waiting task's route is no longer a queue route", 'internal');
      const task: WaitingTask = {
        claim,
        fence,
        submission: { requestId: claim.upstream.requestId, state: claim.upstream.handle },
        provider,
        submittedAt: claim.upstream.submittedAt.getTime(),
      };
      this.adopt(task, Math.max(Date.now(), pollAt.getTime()));
    } catch (err) {
      this.handlers?.failed({ claim, fence }, err);
    }
  }

  /** Extends the leases; drops tasks another holds now (a claim took them back). */
  private async renew(): Promise<void> {
    if (this.stopped || this.renewing) return;
    this.renewing = true;
    try {
      const held = await this.store.renew(this.id, this.config.generator.upstreamLeaseMs, [...this.waiting.keys()]);
      for (const [taskId, task] of this.waiting) {
        const attempt = held.get(taskId);
        if (attempt === task.fence.attempt || task.collecting) {
          this.missed.delete(taskId);
          continue;
        }
        // Not found: locked by another statement this once (skipped), or no longer ours.
        const misses = (this.missed.get(taskId) ?? 0) + 1;
        if (attempt !== undefined || misses >= 2) this.leave(task);
        else this.missed.set(taskId, misses);
      }
    } catch (err) {
      this.logger.warn(`Could not renew the waiting tasks' leases: ${describeError(err)}`);
    } finally {
      this.renewing = false;
    }
  }
}
