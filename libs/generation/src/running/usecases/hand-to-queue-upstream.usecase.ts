import { Injectable, Logger } from '@nestjs/common';
import { QueueImageProvider, UpstreamSubmission } from '@app/providers';
import { ClaimedTask, Fence, RenderBatch, UpstreamWaitStore } from '@app/tasks';
import type { RunOutcome } from '../run-outcome';
import { describeError } from '../task-failure';
import { RouteFailover } from '../route-failover';
import { UpstreamPoller, WaitingTask } from '../upstream-poller.service';
import { priorityOf, RUN_LOG_CONTEXT, RunSteps } from './run-steps';
import { SubmitWithIntent } from './submit-with-intent';
import { TaskOutcomes } from './task-outcomes';

/**
 * How long recording a submit's answer is tried through PostgreSQL's trouble: the upstream
 * already took the request, and an attempt that gives up leaves a submit in doubt, which a
 * route that cannot look it up (fal) submits, and pays for, again. Five tries over 5 s were
 * shorter than a PostgreSQL restart (the chaos run's kill -9: three fal tasks submitted
 * twice); two minutes outlast a restart or a failover. Pauses grow to RECORD_PAUSE_MAX_MS.
 */
const RECORD_BUDGET_MS = 120_000;
const RECORD_PAUSE_MS = 500;
const RECORD_PAUSE_MAX_MS = 2000;

/**
 * A queue upstream's task: submitted within the model's slot (the fenced send first, as for
 * any upstream call), its request recorded in PostgreSQL before anything waits on it, then
 * handed to the poller, and this worker is free. A task that already has a request (a
 * redelivery, a crash recovery, a retry after Kiln's own trouble) is resumed, never
 * submitted again. The poller's answer comes back through CollectQueueResult.
 */
@Injectable()
export class HandToQueueUpstream {
  private readonly logger = new Logger(RUN_LOG_CONTEXT);

  constructor(
    private readonly waits: UpstreamWaitStore,
    private readonly poller: UpstreamPoller,
    private readonly steps: RunSteps,
    private readonly outcomes: TaskOutcomes,
    private readonly intents: SubmitWithIntent,
    private readonly failover: RouteFailover,
  ) {}

  /** A failure to submit or to record ends the attempt like any other: a retry or the task's failure for good. */
  async execute(
    claim: ClaimedTask,
    fence: Fence,
    batch: RenderBatch,
    provider: QueueImageProvider,
    startedAt: number,
  ): Promise<RunOutcome> {
    try {
      return await (claim.upstream ? this.resume(claim, fence, claim.upstream, provider) : this.submit(claim, fence, batch, provider));
    } catch (err) {
      return this.outcomes.afterFailure(claim, fence, err, startedAt);
    }
  }

  private async resume(
    claim: ClaimedTask,
    fence: Fence,
    upstream: NonNullable<ClaimedTask['upstream']>,
    provider: QueueImageProvider,
  ): Promise<RunOutcome> {
    const pollAt = new Date();
    const hold = this.poller.hold(pollAt);
    if (!(await this.waits.resume(fence, hold))) return 'superseded';
    const submission = { requestId: upstream.requestId, state: upstream.handle };
    if (hold.poller)
      this.poller.adopt(this.waitingTask(claim, fence, submission, provider, upstream.submittedAt.getTime()), pollAt.getTime());
    return 'waiting';
  }

  private async submit(claim: ClaimedTask, fence: Fence, batch: RenderBatch, provider: QueueImageProvider): Promise<RunOutcome> {
    const doubt = await this.intents.settleDoubt(fence, provider, this.steps.signal, claim.submitIntent);
    if (doubt.kind === 'fail') throw doubt.error;
    const request = await this.steps.renderRequest(claim, batch, null);
    const { submission, intent } =
      doubt.kind === 'found'
        ? doubt
        : await this.steps.pacedCall(claim, fence, batch, priorityOf(claim), () => {
            // A route seen open while the task waited for its slot is skipped, as a render's is
            // (RouteFailover.beforeCall); only while no intent is recorded: with one, the task
            // may not leave its route (moveTaskToRoute), so it submits here as it would have.
            if (!doubt.inDoubt) this.failover.beforeCall(claim);
            return this.intents.submit(fence, provider, request);
          });
    const submittedAt = Date.now();
    const pollAt = new Date(submittedAt + provider.pollIntervalMs);
    const hold = this.poller.hold(pollAt);
    if (!(await this.recordSubmission(fence, submission, hold))) {
      await this.handOff(fence, submission, intent, pollAt);
      return 'superseded';
    }
    if (hold.poller) this.poller.adopt(this.waitingTask(claim, fence, submission, provider, submittedAt), pollAt.getTime());
    return 'waiting';
  }

  /** Retries the write through PostgreSQL's trouble (RECORD_BUDGET_MS): losing the id would mean paying twice. */
  private async recordSubmission(fence: Fence, submission: UpstreamSubmission, hold: ReturnType<UpstreamPoller['hold']>): Promise<boolean> {
    const giveUpAt = Date.now() + RECORD_BUDGET_MS;
    for (let tries = 1; ; tries++) {
      try {
        return await this.waits.recordSubmission({ fence, requestId: submission.requestId, handle: submission.state, hold });
      } catch (err) {
        if (Date.now() >= giveUpAt) throw err;
        this.logger.warn(
          `Recording upstream request ${submission.requestId} of task ${fence.taskId} failed (${describeError(err)}); trying again`,
        );
        await new Promise((resolve) => setTimeout(resolve, Math.min(RECORD_PAUSE_MS * tries, RECORD_PAUSE_MAX_MS)));
      }
    }
  }

  /**
   * This attempt was taken over before it recorded its request (its lease ran out while
   * PostgreSQL was away): the request goes to the attempt that took over, unless that one
   * submitted since. A failure here is logged, not thrown: the attempt is over either way.
   */
  private async handOff(fence: Fence, submission: UpstreamSubmission, intent: string, pollAt: Date): Promise<void> {
    const given = await this.waits
      .handOff({ fence, requestId: submission.requestId, handle: submission.state }, intent, pollAt)
      .catch((err: unknown) => {
        this.logger.warn(`Handing request ${submission.requestId} of task ${fence.taskId} over failed: ${describeError(err)}`);
        return null;
      });
    if (given === null)
      this.logger.warn(
        `Task ${fence.taskId} was taken over while ${submission.requestId} was submitted, and the attempt that took it over has moved on; that request is left to finish unused`,
      );
    else
      this.logger.log(
        `Task ${fence.taskId} was taken over while ${submission.requestId} was submitted; the request went to attempt ${given}, which polls it instead of submitting again`,
      );
  }

  private waitingTask(
    claim: ClaimedTask,
    fence: Fence,
    submission: UpstreamSubmission,
    provider: QueueImageProvider,
    submittedAt: number,
  ): WaitingTask {
    return { claim, fence, submission, provider, submittedAt };
  }
}
