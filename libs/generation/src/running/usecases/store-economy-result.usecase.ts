import { Injectable, Logger } from '@nestjs/common';
import { RenderRequest, RenderResult } from '@app/providers';
import { ClaimedTask, TaskStateStore } from '@app/tasks';
import type { RunOutcome } from '../run-outcome';
import { classifyFailure, oneLine, TaskFailure } from '../task-failure';
import { TaskTelemetry } from '../task-telemetry';
import { fenceOf, priorityOf, RUN_LOG_CONTEXT, RunSteps } from './run-steps';
import { StoredParts, TaskOutcomes } from './task-outcomes';

/**
 * The economy tier's tasks, handed in by the economy collector (EconomyCollector), which
 * owns their upstream batches: each task's line for its upstream batch, and the results
 * recorded like a standard task's, at the economy price; failures failed for good.
 */
@Injectable()
export class StoreEconomyResult {
  private readonly logger = new Logger(RUN_LOG_CONTEXT);

  constructor(
    private readonly store: TaskStateStore,
    private readonly telemetry: TaskTelemetry,
    private readonly steps: RunSteps,
    private readonly outcomes: TaskOutcomes,
  ) {}

  /**
   * An economy task's line for its upstream batch: its render request, references loaded
   * (a reference that is gone throws a TaskFailure).
   */
  async batchLineRequest(claim: ClaimedTask): Promise<Omit<RenderRequest, 'signal' | 'onProgress'>> {
    if (!claim.batch) throw new TaskFailure(`Batch ${claim.batchId} of task ${claim.id} not found`, 'internal');
    const { signal: _signal, onProgress: _onProgress, ...request } = await this.steps.renderRequest(claim, claim.batch, null);
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
    const batch = claim.batch;
    if (!batch) return 'skipped';
    const startedAt = Date.now();
    const stored: StoredParts = { resultKey: null, preview: null };
    try {
      const result = await this.steps.inFormat(image, batch.outputFormat, priorityOf(claim));
      return await this.outcomes.storeAndRecord(claim, fenceOf(claim), batch, result, 'economy', startedAt, stored);
    } catch (err) {
      await this.outcomes.discardPreview(claim.batchId, stored.preview);
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
        return { fence: fenceOf(claim), message: oneLine(failure.message), code: failure.code };
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
}
