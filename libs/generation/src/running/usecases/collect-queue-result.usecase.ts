import { Inject, Injectable } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { RenderResult, UpstreamPoll } from '@app/providers';
import { UpstreamCancelStore, UpstreamWaitStore } from '@app/tasks';
import { ModelConcurrencyLimiter } from '../../limits/model-concurrency.limiter';
import { RouteFailover } from '../route-failover';
import type { RunOutcome } from '../run-outcome';
import { classifyFailure } from '../task-failure';
import { UpstreamPoller, WaitingTask } from '../upstream-poller.service';
import { priorityOf, RunSteps } from './run-steps';
import { StoredParts, TaskOutcomes } from './task-outcomes';

/**
 * The poller's answer for a task handed to a queue upstream (HandToQueueUpstream): the image
 * made, collected and recorded; or the upstream's failure, retried or failed for good.
 */
@Injectable()
export class CollectQueueResult {
  constructor(
    private readonly limiter: ModelConcurrencyLimiter,
    private readonly poller: UpstreamPoller,
    private readonly waits: UpstreamWaitStore,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly steps: RunSteps,
    private readonly outcomes: TaskOutcomes,
    private readonly cancels: UpstreamCancelStore,
    private readonly failover: RouteFailover,
  ) {}

  /**
   * The poller found the image made: fetch it within the model's slot, store it and record
   * the success. A failure of Kiln's own (storage, database) or a passing one of the download
   * gives the task back to the queue with its request kept, so the next attempt resumes it.
   */
  async collect(task: WaitingTask, done: Extract<UpstreamPoll, { state: 'done' }>): Promise<RunOutcome> {
    const { claim, fence } = task;
    const startedAt = Date.now();
    const stored: StoredParts = { resultKey: null, preview: null };
    try {
      const batch = claim.batch!;
      const cap = 'maxConcurrency' in batch.provider ? batch.provider.maxConcurrency : undefined;
      const lease = await this.limiter.acquire(batch.model, { priority: priorityOf(claim), signal: this.steps.signal, cap });
      let result: RenderResult;
      try {
        result = await this.steps.timed(claim, () => task.provider.fetchResult(task.submission, { signal: this.steps.signal }, done));
      } finally {
        lease.release();
      }
      result = await this.steps.inFormat(result, batch.outputFormat, priorityOf(claim));
      return await this.outcomes.storeAndRecord(claim, fence, batch, result, 'standard', startedAt, stored);
    } catch (err) {
      return this.outcomes.failedAfterStore(claim, fence, err, startedAt, stored);
    } finally {
      this.poller.collected(task);
    }
  }

  /**
   * The upstream's own failure answer (or a task the poller could not take up): a retryable
   * one forgets the request, so the next attempt submits anew; a refusal fails the task. A
   * request whose cancel is being asked ended because of it, most likely: the task goes back
   * to the poller until the sender records the upstream's answer (cancelled and refunded, or
   * left to finish, when this failure counts as any other).
   */
  async upstreamFailed(task: WaitingTask | Pick<WaitingTask, 'claim' | 'fence'>, err: unknown): Promise<RunOutcome> {
    const { claim, fence } = task;
    if ('submission' in task && (await this.cancels.pending(fence))) {
      this.poller.adopt(task, Date.now() + task.provider.pollIntervalMs);
      return 'waiting';
    }
    const failure = classifyFailure(err);
    if (failure.retryable && !failure.internal && fence.attempt < this.config.generator.maxAttempts) {
      // The request forgotten and, for a chain, the task moved on, in one write.
      const next = await this.failover.failedRequest(claim, err);
      if (!(await this.waits.forget(fence, next))) return 'superseded';
      if (next !== null) this.failover.moved(claim, next, err);
    }
    return this.outcomes.afterFailure(claim, fence, err, Date.now());
  }
}
