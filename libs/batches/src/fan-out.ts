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
  const refGroups: string[][] =
    refMode === 'each' ? refUploadIds.map((id) => [id]) : [refMode === 'combined' ? [...refUploadIds] : []];
  for (let promptIndex = 0; promptIndex < promptCount; promptIndex++) {
    for (const refs of refGroups) {
      for (let copy = 0; copy < countPerCombo; copy++) {
        tasks.push({ seq: tasks.length, promptIndex, refUploadIds: refs });
      }
    }
  }
  return tasks;
}

/** Where a task sits in its batch's fan-out: which prompt, which reference, which copy. */
export interface TaskPosition {
  /** 1-based position in the batch's task order. */
  index: number;
  /** 0-based index into the batch's prompts. */
  promptIndex: number;
  /** The reference URL the task pairs with under refMode `each`, else null. */
  refImage: string | null;
  /** 1-based copy number within its (prompt, reference) combination. */
  copy: number;
}

/**
 * The inverse of fanOut for one task: its position follows from its 0-based seq and the
 * batch's shape alone, so nothing but seq needs storing.
 */
export function taskPosition(
  seq: number,
  batch: { refMode: RefMode; refImages: readonly string[]; countPerCombo: number },
): TaskPosition {
  const refsPerPrompt = batch.refMode === 'each' ? batch.refImages.length : 1;
  const combo = Math.floor(seq / batch.countPerCombo);
  return {
    index: seq + 1,
    promptIndex: Math.floor(combo / refsPerPrompt),
    refImage: batch.refMode === 'each' ? batch.refImages[combo % refsPerPrompt] : null,
    copy: (seq % batch.countPerCombo) + 1,
  };
}
