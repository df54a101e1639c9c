import { RefMode } from '@app/database';

/** One task of a batch before it has an id: which prompt and which reference uploads. */
export interface FannedTask {
  /** Position in the batch, 0-based: prompt order, then reference order, then copy index. */
  seq: number;
  promptIndex: number;
  refUploadIds: string[];
}

/** Number of images (= tasks) a request produces (docs/api.md#image-count-per-refmode). */
export function imageCount(prompts: number, refs: number, refMode: RefMode, countPerCombo: number): number {
  return prompts * (refMode === 'each' ? refs : 1) * countPerCombo;
}

/**
 * Expands a request into its tasks in the task order of docs/api.md#image-count-per-refmode:
 * `each` gives one task per (prompt, reference, copy) with that one reference;
 * `combined` attaches every reference to every task; `none` attaches none.
 */
export function fanOut(promptCount: number, refUploadIds: string[], refMode: RefMode, countPerCombo: number): FannedTask[] {
  const tasks: FannedTask[] = [];
  const refGroups: string[][] = refMode === 'each' ? refUploadIds.map((id) => [id]) : [refMode === 'combined' ? [...refUploadIds] : []];
  for (let promptIndex = 0; promptIndex < promptCount; promptIndex++) {
    for (const refs of refGroups) {
      for (let copy = 0; copy < countPerCombo; copy++) {
        tasks.push({ seq: tasks.length, promptIndex, refUploadIds: refs });
      }
    }
  }
  return tasks;
}

// A task's position is computed where the Task object is built (the tasks lib), from seq.
export { TaskPosition, taskPosition } from '@app/tasks';
