import { Inject, Injectable } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import {
  CONTENT_TYPE_OF,
  ReferenceImage,
  RenderFormat,
  RenderQuality,
  RenderRequest,
  RenderResolution,
  RenderResult,
  routeLabel,
} from '@app/providers';
import { StorageDriver, StorageObjectNotFoundError } from '@app/storage';
import { BatchRoute, ClaimedTask, Fence, RenderBatch, TaskStateStore } from '@app/tasks';
import { UploadsService } from '@app/uploads';
import { ModelConcurrencyLimiter } from '../../limits/model-concurrency.limiter';
import { PrioritySemaphore } from '../../limits/priority-semaphore';
import { RoutePacer } from '../../limits/route-pacer';
import { convertImage } from '../batch-previews';
import { ProgressReporter } from '../progress-reporter';
import type { RunHint } from '../run-outcome';
import { shutdownInterrupter } from '../shutdown-interrupter';
import { ShutdownInterruption, TaskFailure } from '../task-failure';
import { TaskTelemetry } from '../task-telemetry';

/** The log context of every line a run writes, whichever step writes it (operators filter on it). */
export const RUN_LOG_CONTEXT = 'TaskRunnerService';

/** The task's send was refused: cancelled or taken over while this run waited for its slot. */
export class NotSent extends Error {}

/** The fence of a claimed task's attempt: every write after the claim holds it. */
export function fenceOf(claim: ClaimedTask): Fence {
  return { taskId: claim.id, attempt: claim.attempts, batchId: claim.batchId };
}

/**
 * Where a task that was taken before (a retry, a crashed generator's task taken over) stands in
 * the local lines: before every first attempt. Ordered by seq like the rest, a taken-over task
 * deep in its batch waited behind every newer batch's first tasks: 13-60 s in the chaos runs,
 * past the crash-recovery bound.
 */
export const RERUN_PRIORITY = -1;

/**
 * Local lines (cores, model slots) serve a batch's n-th task before any batch's (n+1)-th, the
 * order the feeder fills the queue in; reruns first.
 */
export function priorityOf(claim: ClaimedTask): number {
  return claim.attempts > 1 ? RERUN_PRIORITY : claim.seq;
}

/** The same order for a job's hints, before its claim (slot first). */
export function hintPriority(hint: RunHint): number {
  return hint.rerun ? RERUN_PRIORITY : hint.seq;
}

/**
 * The steps every mode of a run takes on the way to an image: the task's render request (its
 * references loaded), an upstream call within the model's slot and the route's pacing, the
 * call's timing, the conversion to the batch's format. It holds what all runs share: the
 * local render slots and the shutdown's interruption.
 */
@Injectable()
export class RunSteps {
  /** CPU-bound local work (builtin renders, thumbnails), one slot per core by default. */
  readonly renderSlots: PrioritySemaphore;
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
    private readonly uploads: UploadsService,
    @Inject(KILN_CONFIG) config: KilnConfig,
    private readonly telemetry: TaskTelemetry,
  ) {
    this.interrupting = shutdownInterrupter(config.generator.concurrency);
    this.renderSlots = new PrioritySemaphore(config.generator.renderConcurrency);
  }

  /** What every wait and call of a run listens on, to be interrupted by a shutdown. */
  get signal(): AbortSignal {
    return this.interrupting.signal;
  }

  /** The shutdown's grace period is over: every run still waiting or rendering gives its task back. */
  interrupt(): void {
    this.interrupting.abort(new ShutdownInterruption());
  }

  /** Writes the render's progress on the task's row, fenced on its attempt. */
  progressOf(fence: Fence): ProgressReporter {
    return new ProgressReporter((pct) => this.store.reportProgress(fence, pct));
  }

  /** An upstream that answered in another format than the batch's: converted here, in a render slot (CPU). */
  async inFormat(result: RenderResult, format: RenderFormat, priority: number): Promise<RenderResult> {
    if (result.contentType === CONTENT_TYPE_OF[format]) return result;
    const data = await this.renderSlots.use(priority, this.interrupting.signal, () => convertImage(result.data, format));
    return { ...result, data, contentType: CONTENT_TYPE_OF[format] };
  }

  async renderRequest(claim: ClaimedTask, batch: RenderBatch, progress: ProgressReporter | null): Promise<RenderRequest> {
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
   * An upstream call (a render, a queue upstream's submit) within the model's slot and the
   * route's pacing (RoutePacer.run): a 429 Kiln caused by going too fast is asked again within this attempt, so it spends none of
   * TASK_MAX_ATTEMPTS; the task is sent (the fenced `send`) once, before its first call.
   */
  pacedCall<T extends object>(claim: ClaimedTask, fence: Fence, batch: RenderBatch, priority: number, call: () => Promise<T>): Promise<T> {
    // A fallback route of a chain has slots and a pacing of its own: the primary's window (or
    // its calls still in flight) must not hold the fallback back once tasks move there.
    const model = claim.routeIndex > 0 ? `${batch.model}@${claim.routeIndex}` : batch.model;
    return this.paced({ model, provider: batch.provider, routes: null }, priority, {
      beforeFirstCall: async () => {
        if (!(await this.store.send(fence))) throw new NotSent();
      },
      onRefusal: (err) => this.telemetry.attemptFailed(claim, err, true),
      call: () => this.timed(claim, call),
    });
  }

  /** A call within the route's slot and pacing; `beforeFirstCall` runs once, holding the first slot. */
  paced<T extends object>(
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
  async timed<T>(claim: ClaimedTask, render: () => Promise<T>): Promise<T> {
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
}
