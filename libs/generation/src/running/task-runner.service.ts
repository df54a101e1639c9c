import { Inject, Injectable, Logger } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { stampStage } from '@app/metrics';
import { ImageProvider, ProviderRoute, QueueImageProvider } from '@app/providers';
import { ClaimedTask, RenderBatch, TaskStateStore } from '@app/tasks';
import { PrioritySemaphore } from '../limits/priority-semaphore';
import { ProviderRegistry } from './provider-registry';
import { chainOf, RouteFailover } from './route-failover';
import type { RunHint, RunOutcome } from './run-outcome';
import { describeError, exhaustedMessage, TaskFailure } from './task-failure';
import { TaskTelemetry } from './task-telemetry';
import { UpstreamCanceller } from './upstream-canceller.service';
import { UpstreamPoller } from './upstream-poller.service';
import { CollectQueueResult } from './usecases/collect-queue-result.usecase';
import { HandToQueueUpstream } from './usecases/hand-to-queue-upstream.usecase';
import { RunSyncRender } from './usecases/run-sync-render.usecase';
import { fenceOf, RUN_LOG_CONTEXT, RunSteps } from './usecases/run-steps';
import { TaskOutcomes } from './usecases/task-outcomes';

/** How long in-flight runs get to record their give-back once the grace period is over. */
const REQUEUE_GRACE_MS = 5000;

/**
 * One task's whole lifecycle for one job delivery: claim (fenced), then the mode its batch's
 * route runs in, each a use case of its own (usecases/): a render in one call
 * (RunSyncRender), a hand-off to a queue upstream (HandToQueueUpstream, whose answers come
 * back through CollectQueueResult); economy tasks come in through the economy collector
 * (StoreEconomyResult), not here. Never throws for anything about the task itself; it throws
 * only when the database cannot record an outcome, and then the job fails in Bull and the
 * reconciler brings the task back later.
 */
@Injectable()
export class TaskRunnerService {
  private readonly logger = new Logger(RUN_LOG_CONTEXT);
  private readonly inFlight = new Set<Promise<RunOutcome>>();

  constructor(
    private readonly store: TaskStateStore,
    private readonly providers: ProviderRegistry,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly telemetry: TaskTelemetry,
    private readonly poller: UpstreamPoller,
    private readonly steps: RunSteps,
    private readonly outcomes: TaskOutcomes,
    private readonly syncRender: RunSyncRender,
    private readonly handToQueue: HandToQueueUpstream,
    private readonly collectQueue: CollectQueueResult,
    private readonly canceller: UpstreamCanceller,
    private readonly failover: RouteFailover,
  ) {}

  /** CPU-bound local work (builtin renders, thumbnails), one slot per core by default. */
  get renderSlots(): PrioritySemaphore {
    return this.steps.renderSlots;
  }

  /** Starts the poller of tasks waiting on queue upstreams (what it hands back runs here) and the sender of their cancels. */
  startPolling(): void {
    this.poller.start({
      done: (task, done) => void this.track(this.collectQueue.collect(task, done)),
      failed: (task, err) => void this.track(this.collectQueue.upstreamFailed(task, err)),
    });
    this.canceller.start();
  }

  /** Stops polling and sending cancels: nothing more is handed to this runner (before drain). */
  async stopPolling(): Promise<void> {
    await Promise.all([this.poller.pause(), this.canceller.stop()]);
  }

  /** Gives the waiting tasks back for the next generator (after drain). */
  releaseWaiting(): Promise<number> {
    return this.poller.releaseAll();
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /**
   * One delivery of a task's job. With the job's hint (its task's batch and seq) the run takes
   * its slot first and claims and sends in one write (slotFirst); without, it claims first.
   */
  run(taskId: string, hint?: RunHint): Promise<RunOutcome> {
    return this.track(hint ? this.slotFirst(taskId, hint) : this.claimAndAttempt(taskId));
  }

  /** Runs counted for the drain: job deliveries, and the poller's collections and failures. */
  private track(run: Promise<RunOutcome>): Promise<RunOutcome> {
    this.inFlight.add(run);
    const forget = (): void => void this.inFlight.delete(run);
    run.then(forget, (err) => {
      forget();
      // Only a poller's runs get here unobserved: the database could not record an outcome.
      this.logger.warn(`A run could not record its outcome: ${describeError(err)}; the task is resumed later`);
    });
    return run;
  }

  /**
   * Waits for in-flight runs up to `graceMs`, then interrupts the rest, which give their tasks
   * back to the queue. The caller has already stopped taking new jobs. Resolves when every run
   * has recorded its outcome (or a few more seconds passed).
   */
  async drain(graceMs: number): Promise<{ finished: number; interrupted: number }> {
    const runs = [...this.inFlight];
    const all = Promise.allSettled(runs);
    const inTime = await raceTimeout(all, graceMs);
    if (inTime) return { finished: runs.length, interrupted: 0 };
    const interrupted = this.inFlight.size;
    this.logger.warn(`Shutdown grace period over; interrupting ${interrupted} task(s) and giving them back to the queue`);
    this.steps.interrupt();
    await raceTimeout(all, REQUEUE_GRACE_MS);
    return { finished: runs.length - interrupted, interrupted };
  }

  private async claimAndAttempt(taskId: string): Promise<RunOutcome> {
    const claim = await this.store.claim(taskId);
    return claim ? this.attempt(claim) : 'skipped';
  }

  /**
   * A job that names its task's batch runs slot first when its route renders in one call
   * (RunSyncRender.slotFirst). A queue upstream's task (resumed, not sent) and a batch not
   * found run the claim-first way.
   */
  private async slotFirst(taskId: string, hint: RunHint): Promise<RunOutcome> {
    const route = await this.store.batchRoute(hint.batchId);
    stampStage(hint.batchId, 'routed');
    // A chain's task learns its route only with its claim (tasks.route_index): claim first.
    if (route && chainOf(route)) return this.claimAndAttempt(taskId);
    const provider = route && this.syncProviderOrNull(route.provider);
    if (!route || !provider) return this.claimAndAttempt(taskId);
    const ran = await this.syncRender.slotFirst(taskId, hint, route, provider);
    return typeof ran === 'string' ? ran : this.attempt(ran.notRunHere);
  }

  /**
   * The provider that renders in one call for a route, or null for a queue upstream or a route
   * that cannot make one (a type unknown to this generator): the claim-first path fails such a
   * task for good and refunds it, so it must not be left behind here.
   */
  private syncProviderOrNull(route: ProviderRoute): ImageProvider | null {
    try {
      return this.providers.forQueueRoute(route) ? null : this.providers.forRoute(route);
    } catch {
      return null;
    }
  }

  /**
   * One attempt of a claimed task, in its route's mode: a hand-off to its queue upstream or a
   * render in one call. A batch that is gone, or a route that cannot make a provider, ends
   * the attempt as any failure does (a retry or the task's failure for good).
   */
  private async attempt(claimed: ClaimedTask): Promise<RunOutcome> {
    let claim = claimed;
    const fence = fenceOf(claim);
    const startedAt = Date.now();
    this.telemetry.started(claim);
    const maxAttempts = this.config.generator.maxAttempts;
    if (claim.attempts > maxAttempts) {
      // Only takeovers get here (a retry never exceeds the limit): the task keeps being
      // interrupted, most likely by crashes. Failing it stops a crash loop.
      const message = exhaustedMessage('The generator was interrupted while making this image', maxAttempts);
      return this.outcomes.failForGood(claim, fence, message, startedAt, new TaskFailure(message, 'internal'));
    }
    let mode: { batch: RenderBatch; queued: QueueImageProvider | null };
    try {
      // A chain's task goes to its route, or the next whose circuit admits it (RouteFailover).
      claim = await this.failover.choose(claim, fence, this.steps.signal);
      mode = this.modeOf(claim);
    } catch (err) {
      return this.outcomes.afterFailure(claim, fence, err, startedAt);
    }
    if (mode.queued) return this.handToQueue.execute(claim, fence, mode.batch, mode.queued, startedAt);
    return this.syncRender.attempt(claim, fence, mode.batch, startedAt);
  }

  /** The task's batch and, for a queue upstream's route, its queue provider (null: it renders in one call). */
  private modeOf(claim: ClaimedTask): { batch: RenderBatch; queued: QueueImageProvider | null } {
    const batch = claim.batch;
    if (!batch) throw new Error(`Batch ${claim.batchId} of task ${claim.id} not found`);
    return { batch, queued: this.providers.forQueueRoute(batch.provider) };
  }
}

async function raceTimeout(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
  });
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
