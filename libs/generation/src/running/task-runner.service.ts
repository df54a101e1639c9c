import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import type { TaskErrorCode } from '@app/database';
import { billsFailure, CONTENT_TYPE_OF, ImageProvider, ProviderRoute, QueueImageProvider, ReferenceImage, RenderFormat, RenderQuality, RenderRequest, RenderResolution, RenderResult, rendersOnCpu, routeLabel, upstreamCostMicros, UpstreamPoll, UpstreamSubmission } from '@app/providers';
import { resultObjectKey, StorageDriver, StorageObjectNotFoundError } from '@app/storage';
import { BatchRoute, ClaimedTask, Fence, nextRenderJob, RenderBatch, RequeueOutcome, TASK_QUEUE, TaskStateStore, UpstreamWaitStore } from '@app/tasks';
import { UploadsService } from '@app/uploads';
import { ModelConcurrencyLimiter } from '../limits/model-concurrency.limiter';
import { RoutePacer } from '../limits/route-pacer';
import { PrioritySemaphore } from '../limits/priority-semaphore';
import { BatchPreviews, convertImage, StoredPreview } from './batch-previews';
import { ProgressReporter } from './progress-reporter';
import { ProviderRegistry } from './provider-registry';
import { shutdownInterrupter } from './shutdown-interrupter';
import { TaskTelemetry } from './task-telemetry';
import { UpstreamPoller, WaitingTask } from './upstream-poller.service';
import { retryDelayMs } from './retry-policy';
import { classifyFailure, describeError, exhaustedMessage, oneLine, ShutdownInterruption, TaskFailure } from './task-failure';

/** What one delivery of a task's job did. */
export type RunOutcome =
  /** Rendered, stored and recorded. */
  | 'succeeded'
  /** Failed for good and refunded (now or by an earlier run). */
  | 'failed'
  /** Back to `queued` with a delayed job for the next attempt. */
  | 'retrying'
  /** Its batch was cancelled before the retry: cancelled and refunded instead. */
  | 'cancelled'
  /** Cancelled (or taken over) while the run waited for a slot: never sent, nothing written. */
  | 'unsent'
  /** Given back to the queue because this generator is shutting down. */
  | 'requeued'
  /** Accepted by its queue upstream (or resumed) and handed to the poller: no worker waits on it. */
  | 'waiting'
  /** Nothing to do: the task is terminal (a duplicate or late delivery) or does not exist. */
  | 'skipped'
  /** Another worker took the task over mid-run; this run's work was discarded. */
  | 'superseded';

const EXTENSION: Record<RenderResult['contentType'], string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
};

/** How long in-flight runs get to record their give-back once the grace period is over. */
const REQUEUE_GRACE_MS = 5000;

/**
 * Tries at recording a submit's answer when PostgreSQL fails: the upstream already took the
 * request, and a retry without its id would pay for it again.
 */
const RECORD_TRIES = 5;
const RECORD_BACKOFF_MS = 500;

/**
 * One task's whole lifecycle for one job delivery: claim (fenced), render through the
 * batch's provider snapshot within the concurrency limits, store, and record the outcome:
 * success, a retry, or a failure refunded exactly once. Never throws for anything about the
 * task itself; it throws only when the database cannot record an outcome, and then the job
 * fails in Bull and the reconciler brings the task back later.
 */
@Injectable()
export class TaskRunnerService {
  private readonly logger = new Logger(TaskRunnerService.name);
  /** CPU-bound local work (builtin renders, thumbnails), one slot per core by default. */
  readonly renderSlots: PrioritySemaphore;
  private readonly inFlight = new Set<Promise<RunOutcome>>();
  private readonly previews: BatchPreviews;
  /**
   * Aborted when a shutdown's grace period runs out: renders in progress and runs still
   * waiting for a slot are interrupted and give their tasks back to the queue.
   */
  private readonly interrupting: AbortController;

  constructor(
    private readonly store: TaskStateStore,
    private readonly storage: StorageDriver,
    private readonly limiter: ModelConcurrencyLimiter,
    private readonly pacer: RoutePacer,
    private readonly providers: ProviderRegistry,
    private readonly uploads: UploadsService,
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly telemetry: TaskTelemetry,
    private readonly waits: UpstreamWaitStore,
    private readonly poller: UpstreamPoller,
  ) {
    this.interrupting = shutdownInterrupter(config.generator.concurrency);
    this.renderSlots = new PrioritySemaphore(config.generator.renderConcurrency);
    this.previews = new BatchPreviews(storage, this.renderSlots);
  }

  /** Starts the poller of tasks waiting on queue upstreams; what it hands back runs here. */
  startPolling(): void {
    this.poller.start({
      done: (task, done) => void this.track(this.collect(task, done)),
      failed: (task, err) => void this.track(this.upstreamFailed(task, err)),
    });
  }

  /** Stops polling: nothing more is handed to this runner (before drain). */
  stopPolling(): Promise<void> {
    return this.poller.pause();
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
    this.interrupting.abort(new ShutdownInterruption());
    await raceTimeout(all, REQUEUE_GRACE_MS);
    return { finished: runs.length - interrupted, interrupted };
  }

  private async claimAndAttempt(taskId: string): Promise<RunOutcome> {
    const claim = await this.store.claim(taskId);
    return claim ? this.attempt(claim) : 'skipped';
  }

  /**
   * A job that names its task's batch: the run waits for its slot by the batch's route (read
   * once per batch) and only then claims the task and sends it, in one write. A task thus
   * costs one row version and one statement fewer than claim, wait, send, and while the run
   * waits the task stays `queued`, so a cancel takes it exactly as before its send. A queue
   * upstream's task (resumed, not sent) and a batch not found run the claim-first way.
   */
  private async slotFirst(taskId: string, hint: RunHint): Promise<RunOutcome> {
    const route = await this.store.batchRoute(hint.batchId);
    const provider = route && this.syncProviderOrNull(route.provider);
    if (!route || !provider) return this.claimAndAttempt(taskId);
    const startedAt = Date.now();
    const taken: { run?: TakenRun } = {};
    const take = async (): Promise<void> => {
      const claim = await this.store.claimAndSend(taskId, hint.batchId);
      if (!claim) throw new NotClaimed();
      // A takeover past the attempt limit, or a batch gone: attempt() handles both, slot-free.
      if (!claim.batch || claim.attempts > this.config.generator.maxAttempts) throw new NotRunHere(claim);
      const fence: Fence = { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId };
      this.telemetry.started(claim);
      taken.run = { claim, fence, batch: claim.batch, progress: new ProgressReporter((pct) => this.store.reportProgress(fence, pct)) };
    };
    const render = async (): Promise<RenderResult> => {
      const { claim, batch, progress } = taken.run!;
      const request = await this.renderRequest(claim, batch, progress);
      return provider.render(request);
    };
    let made: RenderResult;
    try {
      if (rendersOnCpu(route.provider)) {
        made = await this.renderSlots.use(hint.seq, this.interrupting.signal, async () => {
          await take();
          return this.timed(taken.run!.claim, render);
        });
      } else {
        made = await this.paced(route, hint.seq, {
          beforeFirstCall: take,
          onRefusal: (err) => this.telemetry.attemptFailed(taken.run!.claim, err, true),
          call: () => this.timed(taken.run!.claim, render),
        });
      }
    } catch (err) {
      if (err instanceof NotClaimed) return 'skipped';
      if (err instanceof NotRunHere) return this.attempt(err.claim);
      if (!taken.run) return this.failedBeforeClaim(taskId, err);
      const { claim, fence, progress } = taken.run;
      return this.completeAttempt(claim, fence, progress, startedAt, () => Promise.reject(err));
    }
    const { claim, fence, batch, progress } = taken.run!;
    return this.completeAttempt(claim, fence, progress, startedAt, async () => ({ result: await this.inFormat(made, batch.outputFormat, hint.seq) }));
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
   * The wait for a slot failed before the claim (a shutdown's interruption, most likely): the
   * task is claimed now and given the same treatment as a claimed task that failed while it
   * waited (back to the queue for a shutdown), so the job is not lost with this delivery.
   */
  private async failedBeforeClaim(taskId: string, err: unknown): Promise<RunOutcome> {
    const claim = await this.store.claim(taskId);
    if (!claim) return 'skipped';
    const fence: Fence = { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId };
    return this.afterFailure(claim, fence, err, Date.now());
  }

  /**
   * One attempt: render through the batch's provider, store the image (and the batch's
   * preview if this image makes it), record the success; or, on any failure, a retry or the
   * task's failure for good.
   */
  private async attempt(claim: ClaimedTask): Promise<RunOutcome> {
    const fence: Fence = { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId };
    const startedAt = Date.now();
    this.telemetry.started(claim);
    const maxAttempts = this.config.generator.maxAttempts;
    if (claim.attempts > maxAttempts) {
      // Only takeovers get here (a retry never exceeds the limit): the task keeps being
      // interrupted, most likely by crashes. Failing it stops a crash loop.
      const message = exhaustedMessage('The generator was interrupted while making this image', maxAttempts);
      return this.failForGood(claim, fence, message, startedAt, new TaskFailure(message, 'internal'));
    }
    const progress = new ProgressReporter((pct) => this.store.reportProgress(fence, pct));
    return this.completeAttempt(claim, fence, progress, startedAt, async () => {
      const batch = claim.batch;
      if (!batch) throw new Error(`Batch ${claim.batchId} of task ${claim.id} not found`);
      const queued = this.providers.forQueueRoute(batch.provider);
      if (queued) {
        progress.stop();
        return { outcome: await this.handToUpstream(claim, fence, batch, queued) };
      }
      return { result: await this.render(claim, fence, batch, this.providers.forRoute(batch.provider), progress) };
    });
  }

  /**
   * The rest of an attempt once `make` has the image (or handed the task on): store it, with
   * the batch's preview if this image makes it, and record the success; on any failure, a
   * retry or the task's failure for good.
   */
  private async completeAttempt(
    claim: ClaimedTask,
    fence: Fence,
    progress: ProgressReporter,
    startedAt: number,
    make: () => Promise<{ result: RenderResult } | { outcome: RunOutcome }>,
  ): Promise<RunOutcome> {
    // The result's key is the task's, not this attempt's: a later attempt overwrites it, so it
    // is removed only when the task fails for good. A preview is this run's own.
    let resultKey: string | null = null;
    let preview: StoredPreview | null = null;
    try {
      const made = await make();
      if ('outcome' in made) return made.outcome;
      const { result } = made;
      const batch = claim.batch!;
      resultKey = resultObjectKey(claim.resultToken, batch.id, claim.seq + 1, EXTENSION[result.contentType] ?? 'png');
      const stored = await this.storeImage(resultKey, result, batch, priorityOf(claim));
      preview = stored.preview;
      if (stored.failed) throw stored.failed.err;
      progress.stop();
      const outcome = await this.recordSuccess(fence, claim, batch, { key: resultKey, width: result.width, height: result.height }, preview);
      if (outcome === 'succeeded') this.telemetry.finished(claim, 'succeeded', startedAt);
      return outcome;
    } catch (err) {
      progress.stop();
      await this.previews.discard(claim.batchId, preview);
      const outcome = await this.afterFailure(claim, fence, err, startedAt);
      if (outcome === 'failed' && resultKey) await this.removeQuietly([resultKey]);
      return outcome;
    }
  }

  /** The image, within the local or the model's concurrency limits (see renderWithin). */
  private async render(claim: ClaimedTask, fence: Fence, batch: RenderBatch, provider: ImageProvider, progress: ProgressReporter): Promise<RenderResult> {
    const request = await this.renderRequest(claim, batch, progress);
    const result = await this.renderWithin(claim, fence, batch, provider, request, priorityOf(claim));
    return this.inFormat(result, batch.outputFormat, priorityOf(claim));
  }

  /** An upstream that answered in another format than the batch's: converted here, in a render slot (CPU). */
  private async inFormat(result: RenderResult, format: RenderFormat, priority: number): Promise<RenderResult> {
    if (result.contentType === CONTENT_TYPE_OF[format]) return result;
    const data = await this.renderSlots.use(priority, this.interrupting.signal, () => convertImage(result.data, format));
    return { ...result, data, contentType: CONTENT_TYPE_OF[format] };
  }

  private async renderRequest(claim: ClaimedTask, batch: RenderBatch, progress: ProgressReporter | null): Promise<RenderRequest> {
    const references = await this.loadReferences(claim.refUploadIds);
    return {
      prompt: claim.prompt,
      seed: claim.seed,
      width: batch.width,
      height: batch.height,
      resolution: batch.resolution as RenderResolution,
      aspectRatio: batch.aspectRatio,
      quality: batch.supportsQuality ? (batch.quality as RenderQuality) : null,
      background: batch.supportsBackground ? batch.background : null,
      outputFormat: batch.outputFormat,
      references,
      signal: this.interrupting.signal,
      onProgress: (pct) => progress?.report(pct),
    };
  }

  /**
   * A queue upstream's task: submitted within the model's slot (the fenced send first, as for
   * any upstream call), its request recorded in PostgreSQL before anything waits on it, then
   * handed to the poller, and this worker is free. A task that already has a request (a
   * redelivery, a crash recovery, a retry after Kiln's own trouble) is resumed, never
   * submitted again.
   */
  private async handToUpstream(claim: ClaimedTask, fence: Fence, batch: RenderBatch, provider: QueueImageProvider): Promise<RunOutcome> {
    if (claim.upstream) {
      const pollAt = new Date();
      const hold = this.poller.hold(pollAt);
      if (!(await this.waits.resume(fence, hold))) return 'superseded';
      const submission = { requestId: claim.upstream.requestId, state: claim.upstream.handle };
      if (hold.poller) this.poller.adopt(this.waitingTask(claim, fence, submission, provider, claim.upstream.submittedAt.getTime()), pollAt.getTime());
      return 'waiting';
    }
    const request = await this.renderRequest(claim, batch, null);
    const submission: UpstreamSubmission = await this.pacedCall(claim, fence, batch, priorityOf(claim), () => provider.submit(request));
    const submittedAt = Date.now();
    const pollAt = new Date(submittedAt + provider.pollIntervalMs);
    const hold = this.poller.hold(pollAt);
    if (!(await this.recordSubmission(fence, submission, hold))) {
      this.logger.warn(`Task ${claim.id} was taken over while ${submission.requestId} was submitted; that request is left to finish unused`);
      return 'superseded';
    }
    if (hold.poller) this.poller.adopt(this.waitingTask(claim, fence, submission, provider, submittedAt), pollAt.getTime());
    return 'waiting';
  }

  /** Retries the write through PostgreSQL's passing trouble: losing the id would mean paying twice. */
  private async recordSubmission(fence: Fence, submission: UpstreamSubmission, hold: ReturnType<UpstreamPoller['hold']>): Promise<boolean> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.waits.recordSubmission({ fence, requestId: submission.requestId, handle: submission.state, hold });
      } catch (err) {
        if (tries >= RECORD_TRIES) throw err;
        this.logger.warn(`Recording upstream request ${submission.requestId} of task ${fence.taskId} failed (${describeError(err)}); trying again`);
        await new Promise((resolve) => setTimeout(resolve, RECORD_BACKOFF_MS * tries));
      }
    }
  }

  private waitingTask(claim: ClaimedTask, fence: Fence, submission: UpstreamSubmission, provider: QueueImageProvider, submittedAt: number): WaitingTask {
    return { claim, fence, submission, provider, submittedAt };
  }

  /**
   * The poller found the image made: fetch it within the model's slot, store it and record
   * the success. A failure of Kiln's own (storage, database) or a passing one of the download
   * gives the task back to the queue with its request kept, so the next attempt resumes it.
   */
  private async collect(task: WaitingTask, done: Extract<UpstreamPoll, { state: 'done' }>): Promise<RunOutcome> {
    const { claim, fence } = task;
    const startedAt = Date.now();
    let resultKey: string | null = null;
    let preview: StoredPreview | null = null;
    try {
      const batch = claim.batch!;
      const cap = 'maxConcurrency' in batch.provider ? batch.provider.maxConcurrency : undefined;
      const lease = await this.limiter.acquire(batch.model, { priority: priorityOf(claim), signal: this.interrupting.signal, cap });
      let result: RenderResult;
      try {
        result = await this.timed(claim, () => task.provider.fetchResult(task.submission, { signal: this.interrupting.signal }, done));
      } finally {
        lease.release();
      }
      result = await this.inFormat(result, batch.outputFormat, priorityOf(claim));
      resultKey = resultObjectKey(claim.resultToken, batch.id, claim.seq + 1, EXTENSION[result.contentType] ?? 'png');
      const stored = await this.storeImage(resultKey, result, batch, priorityOf(claim));
      preview = stored.preview;
      if (stored.failed) throw stored.failed.err;
      const outcome = await this.recordSuccess(fence, claim, batch, { key: resultKey, width: result.width, height: result.height }, preview);
      if (outcome === 'succeeded') this.telemetry.finished(claim, 'succeeded', startedAt);
      return outcome;
    } catch (err) {
      await this.previews.discard(claim.batchId, preview);
      const outcome = await this.afterFailure(claim, fence, err, startedAt);
      if (outcome === 'failed' && resultKey) await this.removeQuietly([resultKey]);
      return outcome;
    } finally {
      this.poller.collected(task);
    }
  }

  /**
   * An economy task's line for its upstream batch: its render request, references loaded
   * (a reference that is gone throws a TaskFailure).
   */
  async batchLineRequest(claim: ClaimedTask): Promise<Omit<RenderRequest, 'signal' | 'onProgress'>> {
    if (!claim.batch) throw new TaskFailure(`Batch ${claim.batchId} of task ${claim.id} not found`, 'internal');
    const { signal: _signal, onProgress: _onProgress, ...request } = await this.renderRequest(claim, claim.batch, null);
    return request;
  }

  /**
   * An economy task's image, from its upstream batch's results (the economy collector):
   * converted to the batch's format, stored under the task's result key and recorded as its
   * success exactly as a standard task's (previews, sizes, webhooks), its upstream cost at
   * the route's economy price. Throws on Kiln's own trouble (storage, database): the collector
   * reads the results again later, and a success already recorded is then skipped (the task
   * is no longer running).
   */
  async storeBatchResult(claim: ClaimedTask, image: RenderResult): Promise<RunOutcome> {
    const fence: Fence = { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId };
    const batch = claim.batch;
    if (!batch) return 'skipped';
    const startedAt = Date.now();
    let preview: StoredPreview | null = null;
    try {
      const result = await this.inFormat(image, batch.outputFormat, priorityOf(claim));
      const resultKey = resultObjectKey(claim.resultToken, batch.id, claim.seq + 1, EXTENSION[result.contentType] ?? 'png');
      const stored = await this.storeImage(resultKey, result, batch, priorityOf(claim));
      preview = stored.preview;
      if (stored.failed) throw stored.failed.err;
      const outcome = await this.recordSuccess(fence, claim, batch, { key: resultKey, width: result.width, height: result.height }, preview, 'economy');
      if (outcome === 'succeeded') this.telemetry.finished(claim, 'succeeded', startedAt);
      return outcome;
    } catch (err) {
      await this.previews.discard(claim.batchId, preview);
      throw err;
    }
  }

  /**
   * Economy tasks whose upstream batch line failed, that their upstream batch never ran, or
   * whose group the upstream refused (the economy collector): each failed for good and
   * refunded, once, with its failure's own error code (content_refused for a refusal), its
   * fenced failure, refund, tally and outbox rows written a chunk of tasks per transaction
   * (TaskStateStore.failMany) instead of one transaction each. Never retried: a new line would
   * be a new upstream batch and a new charge; and not billed (a batch API bills only what it
   * made). Answers one outcome per task, in order: 'failed', or 'superseded' where the task had
   * ended meanwhile.
   */
  async failBatchTasks(failures: readonly { claim: ClaimedTask; err: unknown }[]): Promise<RunOutcome[]> {
    const startedAt = Date.now();
    for (const { claim, err } of failures) this.telemetry.attemptFailed(claim, err, false);
    const results = await this.store.failMany(
      failures.map(({ claim, err }) => {
        const failure = classifyFailure(err);
        return { fence: { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId }, message: oneLine(failure.message), code: failure.code };
      }),
    );
    return failures.map(({ claim, err }, i) => {
      const tally = results[i];
      if (!tally) return 'superseded';
      this.telemetry.finished(claim, 'failed', startedAt, { err, refunded: tally.refunded });
      if (tally.finished) this.logger.log(`Batch of task ${claim.id} finished: ${tally.status}`);
      return 'failed';
    });
  }

  /**
   * The upstream's own failure answer (or a task the poller could not take up): a retryable
   * one forgets the request, so the next attempt submits anew; a refusal fails the task.
   */
  private async upstreamFailed(task: Pick<WaitingTask, 'claim' | 'fence'>, err: unknown): Promise<RunOutcome> {
    const { claim, fence } = task;
    const failure = classifyFailure(err);
    if (failure.retryable && !failure.internal && fence.attempt < this.config.generator.maxAttempts) {
      if (!(await this.waits.forget(fence))) return 'superseded';
    }
    return this.afterFailure(claim, fence, err, Date.now());
  }

  /**
   * Stores the image and, if this one makes it, the batch's preview, side by side (the task
   * that makes a preview would otherwise finish its wave last). Both settle before this
   * returns, so a failed store still hands back the preview for removal.
   */
  private async storeImage(
    key: string,
    result: RenderResult,
    batch: RenderBatch,
    priority: number,
  ): Promise<{ preview: StoredPreview | null; failed: { err: unknown } | null }> {
    const [failed, preview] = await Promise.all([
      this.storage.put(key, result.data, result.contentType).then(
        () => null,
        (err: unknown) => ({ err }),
      ),
      this.previews.make(batch, result.data, priority),
    ]);
    return { preview, failed };
  }

  private async recordSuccess(
    fence: Fence,
    claim: ClaimedTask,
    batch: RenderBatch,
    result: { key: string; width: number; height: number },
    preview: StoredPreview | null,
    tier: 'standard' | 'economy' = 'standard',
  ): Promise<RunOutcome> {
    // Priced by what the upstream made (its size, the batch's quality), as it bills.
    const made = { resolution: batch.resolution, width: result.width, height: result.height, quality: batch.supportsQuality ? batch.quality : null };
    const costMicros = upstreamCostMicros(batch.provider, made, tier);
    const tally = await this.store.succeed({
      fence,
      batchId: batch.id,
      upstreamCostMicros: costMicros,
      resultUrl: this.storage.publicUrl(result.key),
      resultKey: result.key,
      // What the provider made, which a route's size map may have changed from what was asked.
      width: result.width,
      height: result.height,
      previewUrl: preview?.url ?? null,
    });
    if (!tally) {
      // The attempt that took the task over writes (or wrote) the same result key.
      await this.previews.discard(batch.id, preview);
      return 'superseded';
    }
    await this.previews.recorded(preview, tally.previewUrl);
    this.telemetry.upstreamCost(claim, costMicros);
    if (tally.finished) this.logger.log(`Batch ${claim.batchId} finished: ${tally.status}`);
    return 'succeeded';
  }

  private async afterFailure(claim: ClaimedTask, fence: Fence, err: unknown, startedAt: number): Promise<RunOutcome> {
    if (err instanceof NotSent) return 'unsent';
    if (err instanceof ShutdownInterruption) {
      const given = await this.retry(claim, fence, 0);
      return given === 'requeued' ? 'requeued' : given ?? 'superseded';
    }
    const failure = classifyFailure(err);
    if (failure.internal) {
      this.logger.error(`Task ${claim.id} attempt ${fence.attempt}: ${describeError(err)}`, (err as Error)?.stack);
    } else {
      this.logger.debug?.(`Task ${claim.id} attempt ${fence.attempt}: ${failure.message}`);
    }
    const maxAttempts = this.config.generator.maxAttempts;
    if (failure.retryable && fence.attempt < maxAttempts) {
      this.telemetry.attemptFailed(claim, err, true);
      const delay = retryDelayMs(fence.attempt, { baseMs: this.config.generator.backoffMs }, failure.retryAfterMs);
      const given = await this.retry(claim, fence, delay);
      return given === 'requeued' ? 'retrying' : given ?? 'superseded';
    }
    this.telemetry.attemptFailed(claim, err, false);
    const message = failure.retryable ? exhaustedMessage(failure.message, fence.attempt) : failure.message;
    return this.failForGood(claim, fence, message, startedAt, err);
  }

  /** What the upstream billed for a request that failed (its type says which failures it bills), priced at the size asked. */
  private billedFailureCost(claim: ClaimedTask, err: unknown): number {
    const batch = claim.batch;
    if (!batch || !billsFailure(batch.provider, err)) return 0;
    return upstreamCostMicros(batch.provider, { resolution: batch.resolution, width: batch.width, height: batch.height, quality: batch.supportsQuality ? batch.quality : null });
  }

  private async failForGood(claim: ClaimedTask, fence: Fence, message: string, startedAt: number, err: unknown): Promise<RunOutcome> {
    const costMicros = this.billedFailureCost(claim, err);
    const tally = await this.store.fail(fence, oneLine(message), classifyFailure(err).code, costMicros);
    if (!tally) return 'superseded';
    this.telemetry.upstreamCost(claim, costMicros);
    this.telemetry.finished(claim, 'failed', startedAt, { err, refunded: tally.refunded });
    if (tally.finished) this.logger.log(`Batch of task ${fence.taskId} finished: ${tally.status}`);
    return 'failed';
  }

  /**
   * `running -> queued`, then a job for the next attempt. If the process dies between the
   * two, or Redis refuses the job, the task sits `queued` without a job and the reconciler
   * adds the same job id later. A task of a batch cancelled meanwhile is cancelled instead
   * (no job); null when the fence no longer holds.
   */
  private async retry(claim: ClaimedTask, fence: Fence, delayMs: number): Promise<RequeueOutcome> {
    const given = await this.store.requeue(fence);
    if (given !== 'requeued') return given;
    const job = nextRenderJob({ id: claim.id, attempts: fence.attempt, batchId: claim.batchId, seq: claim.seq }, delayMs);
    try {
      await this.queue.add(job.name, job.data, job.opts);
    } catch (err) {
      this.logger.warn(`Could not enqueue the retry of task ${claim.id} (${describeError(err)}); the reconciler will`);
    }
    return given;
  }

  /**
   * CPU-bound builtin renders take a local slot (one per core); upstream calls take one of
   * the model's slots shared by every replica (as many as the batch's route allows, else
   * MODEL_CONCURRENCY_CAP). Both lines are ordered by the job's priority. Only with its slot
   * is the task sent (the fenced `send`): until then a cancel may take it, and then it is
   * never sent.
   */
  private async renderWithin(
    claim: ClaimedTask,
    fence: Fence,
    batch: RenderBatch,
    provider: ImageProvider,
    request: RenderRequest,
    priority: number,
  ): Promise<RenderResult> {
    const sendAndRender = async (): Promise<RenderResult> => {
      if (!(await this.store.send(fence))) throw new NotSent();
      return this.timed(claim, () => provider.render(request));
    };
    if (rendersOnCpu(batch.provider)) {
      return this.renderSlots.use(priority, this.interrupting.signal, sendAndRender);
    }
    return this.pacedCall(claim, fence, batch, priority, () => provider.render(request));
  }

  /**
   * An upstream call (a render, a queue upstream's submit) within the model's slot and the
   * route's pacing (RoutePacer.run): a 429 Kiln caused by going too fast is asked again within this attempt, so it spends none of
   * TASK_MAX_ATTEMPTS; the task is sent (the fenced `send`) once, before its first call.
   */
  private pacedCall<T extends object>(claim: ClaimedTask, fence: Fence, batch: RenderBatch, priority: number, call: () => Promise<T>): Promise<T> {
    return this.paced(batch, priority, {
      beforeFirstCall: async () => {
        if (!(await this.store.send(fence))) throw new NotSent();
      },
      onRefusal: (err) => this.telemetry.attemptFailed(claim, err, true),
      call: () => this.timed(claim, call),
    });
  }

  /** A call within the route's slot and pacing; `beforeFirstCall` runs once, holding the first slot. */
  private paced<T extends object>(
    route: BatchRoute,
    priority: number,
    steps: { beforeFirstCall: () => Promise<void>; onRefusal: (err: unknown) => void; call: () => Promise<T> },
  ): Promise<T> {
    const maxConcurrency = ('maxConcurrency' in route.provider ? route.provider.maxConcurrency : undefined) ?? this.limiter.cap;
    const ratePerMinute = 'ratePerMinute' in route.provider ? route.provider.ratePerMinute : undefined;
    return this.pacer.run(
      { model: route.model, upstream: routeLabel(route.provider), maxConcurrency, ratePerMinute },
      { priority, signal: this.interrupting.signal, beforeFirstCall: steps.beforeFirstCall, onRefusal: steps.onRefusal },
      steps.call,
    );
  }

  /** The render alone, not its wait for a slot: kiln_render_* and kiln_upstream_* latencies. */
  private async timed<T>(claim: ClaimedTask, render: () => Promise<T>): Promise<T> {
    const started = process.hrtime.bigint();
    let ok = false;
    try {
      const result = await render();
      ok = true;
      return result;
    } finally {
      this.telemetry.rendered(claim, Number(process.hrtime.bigint() - started) / 1e9, ok);
    }
  }

  /** The task's reference images, in its order; one that is gone fails the task for good. */
  private async loadReferences(uploadIds: string[]): Promise<ReferenceImage[]> {
    const rows = await this.uploads.findStoredByIds(uploadIds);
    return Promise.all(
      rows.map(async (ref, i) => {
        if (!ref) throw new TaskFailure(`Reference image ${i + 1} is no longer available`);
        try {
          return { data: await this.storage.get(ref.storageKey), contentType: ref.contentType };
        } catch (err) {
          if (err instanceof StorageObjectNotFoundError) {
            throw new TaskFailure(`Reference image ${i + 1} is no longer available`);
          }
          throw err;
        }
      }),
    );
  }

  private async removeQuietly(keys: string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.storage.remove(key).catch(() => undefined)));
  }
}

/** The task's send was refused: cancelled or taken over while this run waited for its slot. */
class NotSent extends Error {}

/** The claim-and-send found nothing to take: the task is terminal, gone, or not of the hinted batch. */
class NotClaimed extends Error {}

/** Claimed and sent in its slot, but not to be rendered (attempts exhausted, batch gone): see attempt(). */
class NotRunHere extends Error {
  constructor(readonly claim: ClaimedTask) {
    super('not run here');
  }
}

/** A job's hints (RenderJobData): its task's batch, and its seq for the local lines' order. */
export interface RunHint {
  batchId: string;
  seq: number;
}

/** A task claimed and sent within its slot by slotFirst. */
interface TakenRun {
  claim: ClaimedTask;
  fence: Fence;
  batch: RenderBatch;
  progress: ProgressReporter;
}

/**
 * Local lines (cores, model slots) serve a batch's n-th task before any batch's (n+1)-th, the
 * order the feeder fills the queue in.
 */
function priorityOf(claim: ClaimedTask): number {
  return claim.seq;
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
