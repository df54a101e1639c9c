import type { RefMode } from '@app/database';

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
export function taskPosition(seq: number, batch: { refMode: RefMode; refImages: readonly string[]; countPerCombo: number }): TaskPosition {
  const refsPerPrompt = batch.refMode === 'each' ? batch.refImages.length : 1;
  const combo = Math.floor(seq / batch.countPerCombo);
  return {
    index: seq + 1,
    promptIndex: Math.floor(combo / refsPerPrompt),
    refImage: batch.refMode === 'each' ? batch.refImages[combo % refsPerPrompt] : null,
    copy: (seq % batch.countPerCombo) + 1,
  };
}
