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

/** A job's hints (RenderJobData): its task's batch, and its seq and rerun for the local lines' order. */
export interface RunHint {
  batchId: string;
  seq: number;
  /** Taken before (a retry, a takeover): first in the lines (RERUN_PRIORITY). */
  rerun?: boolean;
}
