import { chunkGroups, chunkPlace, chunkRequest, groupPromptLines, PromptGroup, PromptLine } from '@app/prompts-file';
import type { BatchResolution, BatchTier } from '@app/sdk';

/*
 * The new-batch page reads a prompts file with the lib the CLI reads it with
 * (libs/prompts-file, @app/prompts-file): the same lines skipped, the same per-line keys and
 * checks, the same messages, the same grouping into batches and the same split by the plan's
 * batch limit.
 */
export { linesCarryOptions, parsePromptsFile, PromptsFileError } from '@app/prompts-file';
export type { PromptLine } from '@app/prompts-file';

/** The API's batch tier, as the SDK's types carry it. */
export type Tier = BatchTier;

/** The page's pickers: what every prompt gets unless its .jsonl line sets its own. */
export interface Pickers {
  model: string;
  aspectRatio: string;
  resolution: string;
  countPerCombo: number;
  /** Trimmed; empty for none. */
  note: string;
  tier: Tier;
  /** 'none' without references. */
  refMode: 'none' | 'each' | 'combined';
  refImages: string[];
  quality: string;
}

/** The plan's limits a batch must fit: the account's maxImagesPerBatch, the catalog's maxPrompts. */
export interface BatchLimits {
  maxImagesPerBatch: number;
  maxPrompts: number;
}

/** The body of one POST /batches (and its estimate). */
export interface BatchBody {
  model: string;
  aspectRatio: string;
  resolution: string;
  countPerCombo: number;
  seed?: number;
  note: string | null;
  tier: Tier;
  refMode: 'none' | 'each' | 'combined';
  refImages: string[];
  quality: string;
  prompts: string[];
}

/** One batch the page would create: its group (one set of settings), its place in it, its body. */
export interface PlannedBatch {
  group: number;
  first: number;
  count: number;
  images: number;
  /** What its idempotency key ends with when the form makes several batches: its place, as the CLI keys it. */
  place: string;
  body: BatchBody;
}

export interface BatchPlan {
  /** One per distinct set of settings, in the order each first appears. */
  groups: PromptGroup[];
  batches: PlannedBatch[];
}

/**
 * The batches the page creates for its prompts, as `kiln submit` would for the same file and
 * options: a line's settings over the pickers', a group per distinct set (and tier), each group
 * split by the plan's batch limit. Throws a PromptsFileError for a prompt with no model.
 */
export function planBatches(lines: PromptLine[], pickers: Pickers, limits: BatchLimits): BatchPlan {
  const refs = pickers.refMode === 'none' ? [] : pickers.refImages;
  const refMode = refs.length ? pickers.refMode : 'none';
  const base = {
    model: pickers.model,
    aspectRatio: pickers.aspectRatio,
    resolution: pickers.resolution as BatchResolution,
    countPerCombo: pickers.countPerCombo,
    ...(pickers.note && { note: pickers.note }),
    ...(pickers.tier === 'economy' && { tier: 'economy' as const }),
  };
  const groups = groupPromptLines('the prompts', lines, base, refMode === 'each' ? refs.length : 1);
  const batches = chunkGroups(groups, limits.maxImagesPerBatch, limits.maxPrompts).map((chunk) => {
    const { note, tier, ...request } = chunkRequest(groups, chunk);
    const body: BatchBody = {
      ...request,
      note: note ?? null,
      tier: tier ?? 'standard',
      refMode,
      refImages: refs,
      quality: pickers.quality,
    };
    return { ...chunk, place: chunkPlace(chunk), body };
  });
  return { groups, batches };
}

/** Typed prompts: one per non-empty line, trimmed; no line sets anything of its own. */
export function typedLines(text: string): PromptLine[] {
  return text
    .split(/\r?\n/)
    .map((p) => p.trim())
    .filter((p) => p.length > 0)
    .map((prompt) => ({ prompt, options: {} }));
}
