import type { JobOptions } from 'bull';

/*
 * The whole contract between the api (which adds jobs) and the generator (which runs them),
 * in one file.
 *
 * !!! NEVER RENAME OR REUSE THE QUEUE NAME, THE JOB NAMES OR THE JOB ID SCHEME ONCE DEPLOYED !!!
 * Jobs already in Redis carry them: a renamed queue strands its jobs, a renamed job name is
 * never processed, and a changed job id scheme lets the reconciler add a second job for a
 * task that already has one. Add a new name beside the old one instead.
 *
 * Payloads carry ids only; the database holds everything else, so a job never runs on a
 * stale copy of a row. `batchId` and `seq` are hints from the task row, which never change:
 * with them a worker takes its slot before the claim and claims and sends in one write
 * (RunSyncRender.slotFirst). The claim checks the batch id against the row; a job without them
 * (added before they existed) is run as before.
 */
export const TASK_QUEUE = 'kiln-tasks';

export enum TaskJob {
  Render = 'render',
}

export interface RenderJobData {
  taskId: string;
  batchId?: string;
  seq?: number;
  /**
   * The task was taken before (a retry, or a crashed generator's task given a job again): its
   * run goes first in the generator's local lines, not behind every newer batch's lower seqs.
   */
  rerun?: true;
}

/** What a job needs of its task: the id, and the row's batch id and seq as hints. */
export interface RenderJobTask {
  id: string;
  batchId?: string;
  seq?: number;
}

export interface RenderJob {
  name: TaskJob;
  data: RenderJobData;
  opts: JobOptions;
}

/**
 * The Bull job id that runs a task's next attempt, given how many attempts it has had.
 * The first job is the task id (what dispatching adds): a second add of a live job is a
 * no-op. Each retry gets its own id, so a retry can be added while the failing job is still
 * active. Derived from the task row alone, so whoever re-adds a job (the retry path, the
 * reconciler) picks the same id and Bull drops the duplicate.
 */
export function renderJobId(taskId: string, attemptsSoFar: number): string {
  // No ':' in ids: Bull builds Redis keys from them (and BullMQ refuses it outright).
  return attemptsSoFar <= 0 ? taskId : `${taskId}-attempt${attemptsSoFar + 1}`;
}

/**
 * A task's first job. No Bull priority: Bull places a prioritized job by walking the wait
 * list (LINSERT), so every add got slower as the queue grew and blocked the Redis that the
 * workers and the rate limiter share. Fairness comes from what is let into the queue instead
 * (TaskDispatchService).
 */
export function renderJob(task: RenderJobTask): RenderJob {
  return nextRenderJob({ ...task, attempts: 0 });
}

/** The job for a task's next attempt, optionally delayed (a retry's backoff). */
export function nextRenderJob(task: RenderJobTask & { attempts: number }, delayMs = 0): RenderJob {
  // A job without hints runs claim first, which orders a rerun by its claim's attempts instead.
  const hints =
    task.batchId !== undefined && task.seq !== undefined
      ? { batchId: task.batchId, seq: task.seq, ...(task.attempts > 0 ? { rerun: true as const } : {}) }
      : {};
  return {
    name: TaskJob.Render,
    data: { taskId: task.id, ...hints },
    // attempts: 1 because the generator retries upstream failures itself, with its own
    // backoff and its own job ids.
    opts: { jobId: renderJobId(task.id, task.attempts), attempts: 1, ...(delayMs > 0 ? { delay: delayMs } : {}) },
  };
}
