import type { TaskView } from './task-rows';
import type { TaskPosition } from './task-position';

/** A task as the Task object shows it: its row and its position in the batch. */
export type PositionedTask = TaskView & TaskPosition;

/**
 * The Task object as clients see it: the api answers with it and webhook events carry it.
 * The api's TaskDto documents it; a spec there checks the documented fields are these.
 */
export interface TaskObject {
  id: string;
  batchId: string;
  prompt: string;
  status: string;
  progress: number;
  resultUrls: string[];
  error: string | null;
  index: number;
  promptIndex: number;
  refImage: string | null;
  copy: number;
  width: number | null;
  height: number | null;
  errorCode: string | null;
  /** The api's reads only: its cancel was asked of its upstream, not yet answered (it is still `running`). */
  cancelling?: boolean;
  /** The api's reads and the progress stream only: Unix ms when a worker first took it; null before. */
  startedAt?: number | null;
  /** The api's reads and the progress stream only: Unix ms when it ended; null until then. */
  finishedAt?: number | null;
}

export function taskObject(t: PositionedTask): TaskObject {
  const succeeded = t.status === 'succeeded';
  const failed = t.status === 'failed';
  return {
    id: t.id,
    batchId: t.batchId,
    prompt: t.prompt,
    status: t.status,
    progress: t.progress,
    resultUrls: succeeded && t.resultUrl ? [t.resultUrl] : [],
    error: t.error,
    index: t.index,
    promptIndex: t.promptIndex,
    refImage: t.refImage,
    copy: t.copy,
    width: succeeded ? t.resultWidth : null,
    height: succeeded ? t.resultHeight : null,
    // A task failed before error codes were recorded is still a failure with a cause.
    errorCode: failed ? (t.errorCode ?? 'internal') : null,
    // Absent from webhook events (their rows do not carry it), which stay as they were.
    ...(t.cancelling === undefined ? {} : { cancelling: t.cancelling }),
    ...(t.startedAt === undefined ? {} : { startedAt: t.startedAt }),
    ...(t.finishedAt === undefined ? {} : { finishedAt: t.finishedAt }),
  };
}
