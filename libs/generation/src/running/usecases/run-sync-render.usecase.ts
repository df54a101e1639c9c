import { Inject, Injectable } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { stampStage } from '@app/metrics';
import { ImageProvider, RenderRequest, RenderResult, rendersOnCpu } from '@app/providers';
import { BatchRoute, ClaimedTask, Fence, RenderBatch, TaskStateStore } from '@app/tasks';
import { ProgressReporter } from '../progress-reporter';
import { ProviderRegistry } from '../provider-registry';
import type { RunHint, RunOutcome } from '../run-outcome';
import { RouteFailover } from '../route-failover';
import { TaskTelemetry } from '../task-telemetry';
import { fenceOf, hintPriority, NotSent, priorityOf, RunSteps } from './run-steps';
import { StoredParts, TaskOutcomes } from './task-outcomes';

/** Claimed and sent in its slot, but not to be rendered (attempts exhausted, batch gone): the runner's attempt() handles both, slot-free. */
export interface NotRunHere {
  notRunHere: ClaimedTask;
}

/**
 * A route that renders in one call (a builtin render on a local core, an upstream that
 * answers with the image): render through the batch's provider within the concurrency
 * limits, store, and record the success; on any failure, a retry or the task's failure for
 * good.
 */
@Injectable()
export class RunSyncRender {
  constructor(
    private readonly store: TaskStateStore,
    private readonly providers: ProviderRegistry,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly telemetry: TaskTelemetry,
    private readonly steps: RunSteps,
    private readonly outcomes: TaskOutcomes,
    private readonly failover: RouteFailover,
  ) {}

  /**
   * A job that names its task's batch: the run waits for its slot by the batch's route (read
   * once per batch) and only then claims the task and sends it, in one write. A task thus
   * costs one row version and one statement fewer than claim, wait, send, and while the run
   * waits the task stays `queued`, so a cancel takes it exactly as before its send.
   */
  async slotFirst(taskId: string, hint: RunHint, route: BatchRoute, provider: ImageProvider): Promise<RunOutcome | NotRunHere> {
    const startedAt = Date.now();
    const priority = hintPriority(hint);
    const taken: { run?: TakenRun } = {};
    const take = async (): Promise<void> => {
      stampStage(hint.batchId, 'admitted');
      const claim = await this.store.claimAndSend(taskId, hint.batchId);
      stampStage(hint.batchId, 'claimed');
      if (!claim) throw new NotClaimed();
      // A takeover past the attempt limit, or a batch gone: attempt() handles both, slot-free.
      if (!claim.batch || claim.attempts > this.config.generator.maxAttempts) throw new NotRunHereError(claim);
      const fence = fenceOf(claim);
      this.telemetry.started(claim);
      taken.run = { claim, fence, batch: claim.batch, progress: this.steps.progressOf(fence) };
    };
    const render = async (): Promise<RenderResult> => {
      const { claim, batch, progress } = taken.run!;
      const request = await this.steps.renderRequest(claim, batch, progress);
      stampStage(hint.batchId, 'called');
      const made = await provider.render(request);
      stampStage(hint.batchId, 'answered');
      return made;
    };
    let made: RenderResult;
    try {
      if (rendersOnCpu(route.provider)) {
        made = await this.steps.renderSlots.use(priority, this.steps.signal, async () => {
          await take();
          return this.steps.timed(taken.run!.claim, render);
        });
      } else {
        made = await this.steps.paced(route, priority, {
          beforeFirstCall: take,
          onRefusal: (err) => this.telemetry.attemptFailed(taken.run!.claim, err, true),
          call: () => this.steps.timed(taken.run!.claim, render),
        });
      }
    } catch (err) {
      if (err instanceof NotClaimed) return 'skipped';
      if (err instanceof NotRunHereError) return { notRunHere: err.claim };
      if (!taken.run) return this.failedBeforeClaim(taskId, err);
      const { claim, fence, progress } = taken.run;
      return this.completeAttempt(claim, fence, progress, startedAt, () => Promise.reject(err));
    }
    const { claim, fence, batch, progress } = taken.run!;
    return this.completeAttempt(claim, fence, progress, startedAt, () => this.steps.inFormat(made, batch.outputFormat, priority));
  }

  /**
   * A claimed task (the claim-first way): render through the batch's provider, store the
   * image (and the batch's preview if this image makes it), record the success; or, on any
   * failure, a retry or the task's failure for good.
   */
  attempt(claim: ClaimedTask, fence: Fence, batch: RenderBatch, startedAt: number): Promise<RunOutcome> {
    const progress = this.steps.progressOf(fence);
    return this.completeAttempt(claim, fence, progress, startedAt, () =>
      this.render(claim, fence, batch, this.providers.forRoute(batch.provider), progress),
    );
  }

  /**
   * The wait for a slot failed before the claim (a shutdown's interruption, most likely): the
   * task is claimed now and given the same treatment as a claimed task that failed while it
   * waited (back to the queue for a shutdown), so the job is not lost with this delivery.
   */
  private async failedBeforeClaim(taskId: string, err: unknown): Promise<RunOutcome> {
    const claim = await this.store.claim(taskId);
    if (!claim) return 'skipped';
    return this.outcomes.afterFailure(claim, fenceOf(claim), err, Date.now());
  }

  /**
   * The rest of an attempt once `make` has the image: store it, with the batch's preview if
   * this image makes it, and record the success; on any failure, a retry or the task's
   * failure for good.
   */
  private async completeAttempt(
    claim: ClaimedTask,
    fence: Fence,
    progress: ProgressReporter,
    startedAt: number,
    make: () => Promise<RenderResult>,
  ): Promise<RunOutcome> {
    const stored: StoredParts = { resultKey: null, preview: null };
    try {
      const result = await make();
      return await this.outcomes.storeAndRecord(claim, fence, claim.batch!, result, 'standard', startedAt, stored, () => progress.stop());
    } catch (err) {
      progress.stop();
      return this.outcomes.failedAfterStore(claim, fence, err, startedAt, stored);
    }
  }

  /** The image, within the local or the model's concurrency limits (see renderWithin). */
  private async render(
    claim: ClaimedTask,
    fence: Fence,
    batch: RenderBatch,
    provider: ImageProvider,
    progress: ProgressReporter,
  ): Promise<RenderResult> {
    const request = await this.steps.renderRequest(claim, batch, progress);
    const result = await this.renderWithin(claim, fence, batch, provider, request, priorityOf(claim));
    return this.steps.inFormat(result, batch.outputFormat, priorityOf(claim));
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
      return this.steps.timed(claim, () => provider.render(request));
    };
    if (rendersOnCpu(batch.provider)) {
      return this.steps.renderSlots.use(priority, this.steps.signal, sendAndRender);
    }
    return this.steps.pacedCall(claim, fence, batch, priority, () => {
      this.failover.beforeCall(claim);
      return provider.render(request);
    });
  }
}

/** The claim-and-send found nothing to take: the task is terminal, gone, or not of the hinted batch. */
class NotClaimed extends Error {}

/** Carries a NotRunHere claim out of its slot's wait. */
class NotRunHereError extends Error {
  constructor(readonly claim: ClaimedTask) {
    super('not run here');
  }
}

/** A task claimed and sent within its slot by slotFirst. */
interface TakenRun {
  claim: ClaimedTask;
  fence: Fence;
  batch: RenderBatch;
  progress: ProgressReporter;
}
