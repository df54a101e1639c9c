import { Injectable, Logger } from '@nestjs/common';
import { isProviderError, ProviderError, QueueImageProvider, RenderRequest, UpstreamSubmission } from '@app/providers';
import { Fence, SubmitIntent, SubmitIntentStore } from '@app/tasks';
import { NotSent, RUN_LOG_CONTEXT } from './run-steps';

/** What a submit in doubt (an intent with no recorded request) becomes. */
export type UnknownSubmitOutcome =
  /** intent: the stamp of the intent that submit answers (SubmitIntent.stamp). */
  | { kind: 'found'; submission: UpstreamSubmission; intent: string }
  /** inDoubt: an earlier attempt's intent is still recorded (its submit found absent upstream, or sent again by onUnknownSubmit). */
  | { kind: 'submit'; inDoubt: boolean }
  | { kind: 'fail'; error: ProviderError };

/**
 * A queue upstream's submit with its intent recorded first (SubmitIntentStore): a crash
 * between the call and the recording of its answer leaves a submit in doubt, which the next
 * attempt settles before it submits: found upstream where the route's type can look (then
 * resumed, never submitted again), else as the route's `onUnknownSubmit` says.
 */
@Injectable()
export class SubmitWithIntent {
  private readonly logger = new Logger(RUN_LOG_CONTEXT);

  constructor(private readonly intents: SubmitIntentStore) {}

  /**
   * The doubt an earlier attempt left, settled: resume what it submitted, submit (again), or
   * fail the task. `claimed`: the intent as the attempt's claim read it (ClaimedTask.submitIntent;
   * only this attempt writes intents after it), so no read per submit; undefined to read it here.
   */
  async settleDoubt(
    fence: Fence,
    provider: QueueImageProvider,
    signal?: AbortSignal,
    claimed?: SubmitIntent | null,
  ): Promise<UnknownSubmitOutcome> {
    const intent = claimed !== undefined ? claimed : await this.intents.unanswered(fence);
    if (!intent) return { kind: 'submit', inDoubt: false };
    if (provider.findSubmitted) {
      const looked = await provider.findSubmitted(intent.key, intent.at, signal);
      if (looked.state === 'found') {
        this.logger.log(
          `Task ${fence.taskId}: the submit a crash left in doubt was found upstream (${looked.submission.requestId}); resumed`,
        );
        return { kind: 'found', submission: looked.submission, intent: intent.stamp };
      }
      if (looked.state === 'absent') return { kind: 'submit', inDoubt: true };
      this.logger.warn(`Task ${fence.taskId}: the submit in doubt could not be looked up (${looked.detail})`);
    }
    if (provider.onUnknownSubmit === 'fail') {
      return {
        kind: 'fail',
        error: new ProviderError(
          'upstream_error',
          'A crash left the upstream request for this image unanswered and the upstream cannot be asked about it; the route fails such tasks (onUnknownSubmit: fail)',
          { retryable: false },
        ),
      };
    }
    this.logger.warn(`Task ${fence.taskId}: a submit a crash left in doubt is sent again (onUnknownSubmit: resubmit)`);
    return { kind: 'submit', inDoubt: true };
  }

  /**
   * The intent, committed, then the call. An answer from the upstream that it did not take
   * the request (any HTTP status) clears the intent; a timeout or a broken connection leaves
   * it, as the upstream may have taken the request. Answers the submission with the stamp of
   * its intent (what hands it to a later attempt: UpstreamWaitStore.handOff).
   */
  async submit(
    fence: Fence,
    provider: QueueImageProvider,
    request: RenderRequest,
  ): Promise<{ submission: UpstreamSubmission; intent: string }> {
    const intent = await this.intents.record(fence, provider.submitKey(request));
    // Taken over (or cancelled) since the send: this run must not submit.
    if (intent === null) throw new NotSent();
    try {
      return { submission: await provider.submit(request), intent };
    } catch (err) {
      if (isProviderError(err) && err.status !== undefined) await this.intents.clear(fence);
      throw err;
    }
  }
}
