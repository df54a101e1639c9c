import type { JobOptions } from 'bull';
import { renderJob, RenderJobData, TaskJob } from '@app/batches';

/**
 * The Bull job id that runs a task's next attempt, given how many attempts it has had.
 * The first job is the task id (what dispatching adds); each retry gets its own id, so a
 * retry can be added while the failing job is still active. Derived from the task row
 * alone, so whoever re-adds a job (the retry path, the reconciler) picks the same id and
 * Bull drops the duplicate.
 */
export function renderJobId(taskId: string, attemptsSoFar: number): string {
  // No ':' in ids: Bull builds Redis keys from them (and BullMQ refuses it outright).
  return attemptsSoFar <= 0 ? taskId : `${taskId}-attempt${attemptsSoFar + 1}`;
}

/** The job for a task's next attempt, optionally delayed (a retry's backoff). */
export function nextRenderJob(
  task: { id: string; attempts: number },
  delayMs = 0,
): { name: string; data: RenderJobData; opts: JobOptions } {
  const first = renderJob(task.id);
  return {
    name: TaskJob.Render,
    data: first.data,
    opts: { ...first.opts, jobId: renderJobId(task.id, task.attempts), ...(delayMs > 0 ? { delay: delayMs } : {}) },
  };
}
