import type { TaskView } from './task-rows';

/**
 * The Task object as clients see it, for code outside the api that shows it (webhook events).
 * The api's TaskDto.from builds the same shape; a spec beside it asserts the two agree.
 */
export interface TaskObject {
  id: string;
  batchId: string;
  prompt: string;
  status: string;
  progress: number;
  resultUrls: string[];
  error: string | null;
}

export function taskObject(t: TaskView): TaskObject {
  return {
    id: t.id,
    batchId: t.batchId,
    prompt: t.prompt,
    status: t.status,
    progress: t.progress,
    resultUrls: t.status === 'succeeded' && t.resultUrl ? [t.resultUrl] : [],
    error: t.error,
  };
}
