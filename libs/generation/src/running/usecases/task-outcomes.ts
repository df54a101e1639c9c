import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { BatchTier } from '@app/geometry';
import { stampStage } from '@app/metrics';
import { billsFailure, MadeImage, RenderResult, upstreamCostMicros } from '@app/providers';
import { resultObjectKey, StorageDriver } from '@app/storage';
import { ClaimedTask, Fence, nextRenderJob, RenderBatch, RequeueOutcome, TASK_QUEUE, TaskStateStore } from '@app/tasks';
import { BatchPreviews, StoredPreview } from '../batch-previews';
import { retryDelayMs } from '../retry-policy';
import type { RunOutcome } from '../run-outcome';
import { classifyFailure, describeError, exhaustedMessage, oneLine, ShutdownInterruption } from '../task-failure';
import { TaskTelemetry } from '../task-telemetry';
import { RouteFailover } from '../route-failover';
import { NotSent, priorityOf, RUN_LOG_CONTEXT, RunSteps } from './run-steps';

const EXTENSION: Record<RenderResult['contentType'], string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
};

/**
 * What a run stored before it recorded the success, so that its failure path removes it. The
 * result's key is the task's, not this attempt's: a later attempt overwrites it, so it is
 * removed only when the task fails for good. A preview is this run's own.
 */
export interface StoredParts {
  resultKey: string | null;
  preview: StoredPreview | null;
}

/**
 * How a run ends, whatever its mode: the image stored (with the batch's preview if it makes
 * it) and the success recorded at the upstream's cost; or, on a failure, a retry, a give-back
 * for a shutdown, or the task's failure for good, refunded exactly once.
 */
@Injectable()
export class TaskOutcomes {
  private readonly logger = new Logger(RUN_LOG_CONTEXT);
  private readonly previews: BatchPreviews;

  constructor(
    private readonly store: TaskStateStore,
    private readonly storage: StorageDriver,
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly telemetry: TaskTelemetry,
    private readonly failover: RouteFailover,
    steps: RunSteps,
  ) {
    this.previews = new BatchPreviews(storage, steps.renderSlots);
  }

  /**
   * Stores the image under the task's result key, with the batch's preview if this image
   * makes it, and records the success at the tier's price; `stored` keeps what was stored for
   * the caller's failure path. `beforeRecord` runs once the image is stored.
   */
  async storeAndRecord(
    claim: ClaimedTask,
    fence: Fence,
    batch: RenderBatch,
    result: RenderResult,
    tier: BatchTier,
    startedAt: number,
    stored: StoredParts,
    beforeRecord?: () => void,
  ): Promise<RunOutcome> {
    const resultKey = resultObjectKey(claim.resultToken, batch.id, claim.seq + 1, EXTENSION[result.contentType] ?? 'png');
    stored.resultKey = resultKey;
    const put = await this.storeImage(resultKey, result, batch, priorityOf(claim));
    stored.preview = put.preview;
    if (put.failed) throw put.failed.err;
    stampStage(batch.id, 'stored');
    beforeRecord?.();
    const outcome = await this.recordSuccess(
      fence,
      claim,
      batch,
      { key: resultKey, width: result.width, height: result.height, usage: result.usage, runSeconds: result.runSeconds },
      stored.preview,
      tier,
    );
    stampStage(batch.id, 'succeeded');
    if (outcome === 'succeeded') {
      this.telemetry.finished(claim, 'succeeded', startedAt);
      await this.failover.succeeded(claim);
    }
    return outcome;
  }

  /** A run that failed after storing (some of) its image: the preview goes, and the image too if the task failed for good. */
  async failedAfterStore(claim: ClaimedTask, fence: Fence, err: unknown, startedAt: number, stored: StoredParts): Promise<RunOutcome> {
    await this.discardPreview(claim.batchId, stored.preview);
    const outcome = await this.afterFailure(claim, fence, err, startedAt);
    if (outcome === 'failed' && stored.resultKey) await this.removeQuietly([stored.resultKey]);
    return outcome;
  }

  discardPreview(batchId: string, preview: StoredPreview | null): Promise<void> {
    return this.previews.discard(batchId, preview);
  }

  async afterFailure(claim: ClaimedTask, fence: Fence, err: unknown, startedAt: number): Promise<RunOutcome> {
    if (err instanceof NotSent) return 'unsent';
    if (err instanceof ShutdownInterruption) {
      const given = await this.retry(claim, fence, 0);
      return given === 'requeued' ? 'requeued' : (given ?? 'superseded');
    }
    const failure = classifyFailure(err);
    if (failure.internal) {
      this.logger.error(`Task ${claim.id} attempt ${fence.attempt}: ${describeError(err)}`, (err as Error)?.stack);
    } else {
      this.logger.debug?.(`Task ${claim.id} attempt ${fence.attempt}: ${failure.message}`);
    }
    const maxAttempts = this.config.generator.maxAttempts;
    const retrying = failure.retryable && fence.attempt < maxAttempts;
    // Before the retry's requeue: the move to the next route is fenced on the running attempt.
    await this.failover.failed(claim, fence, err, retrying);
    if (retrying) {
      this.telemetry.attemptFailed(claim, err, true);
      const delay = retryDelayMs(fence.attempt, { baseMs: this.config.generator.backoffMs }, failure.retryAfterMs);
      const given = await this.retry(claim, fence, delay);
      return given === 'requeued' ? 'retrying' : (given ?? 'superseded');
    }
    this.telemetry.attemptFailed(claim, err, false);
    const message = failure.retryable ? exhaustedMessage(failure.message, fence.attempt) : failure.message;
    return this.failForGood(claim, fence, message, startedAt, err);
  }

  async failForGood(claim: ClaimedTask, fence: Fence, message: string, startedAt: number, err: unknown): Promise<RunOutcome> {
    const costMicros = this.billedFailureCost(claim, err);
    const tally = await this.store.fail(fence, oneLine(message), classifyFailure(err).code, costMicros);
    if (!tally) return 'superseded';
    this.telemetry.upstreamCost(claim, costMicros);
    this.telemetry.finished(claim, 'failed', startedAt, { err, refunded: tally.refunded });
    if (tally.finished) this.logger.log(`Batch of task ${fence.taskId} finished: ${tally.status}`);
    return 'failed';
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
    result: { key: string; width: number; height: number } & Pick<RenderResult, 'usage' | 'runSeconds'>,
    preview: StoredPreview | null,
    tier: BatchTier,
  ): Promise<RunOutcome> {
    // Priced by what the upstream made (its size, the batch's quality, the tokens or run time
    // it reported), as it bills; null when nothing prices it (recorded unpriced, never $0).
    const made: MadeImage = {
      resolution: batch.resolution,
      width: result.width,
      height: result.height,
      quality: batch.supportsQuality ? batch.quality : null,
      ...(result.usage ? { usage: result.usage } : {}),
      ...(result.runSeconds !== undefined ? { runSeconds: result.runSeconds } : {}),
    };
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

  /** What the upstream billed for a request that failed (its type says which failures it bills), priced at the size asked. */
  private billedFailureCost(claim: ClaimedTask, err: unknown): number | null {
    const batch = claim.batch;
    if (!batch || !billsFailure(batch.provider, err)) return 0;
    return upstreamCostMicros(batch.provider, {
      resolution: batch.resolution,
      width: batch.width,
      height: batch.height,
      quality: batch.supportsQuality ? batch.quality : null,
    });
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

  private async removeQuietly(keys: string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.storage.remove(key).catch(() => undefined)));
  }
}
