import { CATALOG_DEFAULTS, CATALOG_LIMITS } from '@app/catalog';
import { BATCH_TIERS, BatchTier, OutputFormat, REF_MODES, RefMode, Resolution } from '@app/database';
import { invalidRequest } from '@app/errors';
import { isAspectRatio, RESOLUTIONS } from '@app/geometry';

/**
 * Shape rules of a batch request (docs/api.md#batch-creation-request, docs/api.md#step-2-request-shape). The api's DTO
 * decorates the same constants, so the OpenAPI document and these checks cannot drift.
 */
export { REF_MODES, BATCH_TIERS };
export const QUALITIES = ['auto', 'low', 'medium', 'high'] as const;
export type Quality = (typeof QUALITIES)[number];
export const BACKGROUND_PATTERN = /^(transparent|#[0-9A-Fa-f]{6})$/;
export const MAX_PROMPTS = CATALOG_LIMITS.maxPrompts;
export const COUNT_PER_COMBO = CATALOG_LIMITS.countPerCombo;
export const MAX_NOTE_LENGTH = 1000;
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const satisfies readonly OutputFormat[];
/** Seeds are 31-bit: task n's (seed + n - 1) wraps to 0 past this, so it always fits. */
export const SEED_MAX = 2 ** 31 - 1;
/**
 * How far ahead a deadline may be: 7 days. A deadline is for an interactive caller's "not
 * after this"; one further out would outlive the work it bounds (and, with a short
 * RETENTION_DAYS, the results themselves).
 */
export const MAX_DEADLINE_AHEAD_MS = 7 * 24 * 60 * 60_000;

/** Body of `POST /v1/batches` (and of the dashboard's equivalent), as the caller sent it. */
export interface CreateBatchInput {
  prompts: string[];
  model: string;
  aspectRatio?: string;
  resolution?: Resolution;
  countPerCombo?: number;
  refMode?: RefMode;
  refImages?: string[];
  quality?: Quality;
  /** 'transparent' | '#RRGGBB'; absent or null = auto. */
  background?: string | null;
  note?: string | null;
  /** 0..SEED_MAX; absent or null: each task's seed is drawn from the batch id. */
  seed?: number | null;
  outputFormat?: OutputFormat;
  /** standard (default) or economy: the model's economy price, results within its economyWindowHours. */
  tier?: BatchTier;
  /** Unix ms: tasks not sent to their upstream by then are cancelled and refunded. Absent or null: none. */
  deadline?: number | null;
}

/** The request with every default applied. */
export interface BatchRequest {
  prompts: string[];
  model: string;
  aspectRatio: string;
  resolution: Resolution;
  countPerCombo: number;
  refMode: RefMode;
  refImages: string[];
  quality: Quality;
  background: string | null;
  note: string | null;
  seed: number | null;
  outputFormat: OutputFormat;
  tier: BatchTier;
  deadline: Date | null;
}

/**
 * Step 2 of docs/api.md#validation-order for what a DTO cannot express (per-item prompt rules with the
 * item's path, and refMode/refImages consistency), plus a backstop of the DTO's type rules
 * for callers that skip it: the charge is computed from these fields, so they are never
 * trusted blindly.
 */
export function normalizeBatchRequest(input: CreateBatchInput, now: number = Date.now()): BatchRequest {
  const { prompts } = input;
  if (!Array.isArray(prompts)) throw invalidRequest('prompts', 'isArray', 'prompts must be an array of strings');
  if (prompts.length < 1) throw invalidRequest('prompts', 'arrayMinSize', 'prompts must hold at least 1 prompt');
  if (prompts.length > MAX_PROMPTS) {
    throw invalidRequest('prompts', 'arrayMaxSize', `prompts may hold at most ${MAX_PROMPTS} prompts`);
  }
  prompts.forEach((p, i) => {
    if (typeof p !== 'string') throw invalidRequest(`prompts[${i}]`, 'isString', `prompts[${i}] must be a string`);
    if (p.trim().length === 0) throw invalidRequest(`prompts[${i}]`, 'blank', `prompts[${i}] is empty`);
    if (p.includes('\u0000')) throw invalidRequest(`prompts[${i}]`, 'contains_nul', `prompts[${i}] contains U+0000`);
  });
  if (typeof input.model !== 'string') throw invalidRequest('model', 'isString', 'model must be a string');

  const aspectRatio = input.aspectRatio ?? CATALOG_DEFAULTS.aspectRatio;
  if (!isAspectRatio(aspectRatio)) {
    throw invalidRequest('aspectRatio', 'matches', 'aspectRatio must look like 16:9');
  }
  const resolution = input.resolution ?? CATALOG_DEFAULTS.resolution;
  if (!RESOLUTIONS.includes(resolution)) throw invalidRequest('resolution', 'isIn', 'resolution must be 1K, 2K or 4K');
  const countPerCombo = input.countPerCombo ?? CATALOG_DEFAULTS.countPerCombo;
  if (!Number.isInteger(countPerCombo) || countPerCombo < COUNT_PER_COMBO.min || countPerCombo > COUNT_PER_COMBO.max) {
    throw invalidRequest('countPerCombo', 'out_of_range', 'countPerCombo must be an integer from 1 to 20');
  }
  const quality = input.quality ?? CATALOG_DEFAULTS.quality;
  if (!QUALITIES.includes(quality)) throw invalidRequest('quality', 'isIn', 'quality must be auto, low, medium or high');
  const background = input.background ?? null;
  if (background !== null && (typeof background !== 'string' || !BACKGROUND_PATTERN.test(background))) {
    throw invalidRequest('background', 'matches', 'background must be "transparent" or a #RRGGBB colour');
  }
  const note = input.note ?? null;
  if (note !== null && (typeof note !== 'string' || note.length > MAX_NOTE_LENGTH)) {
    throw invalidRequest('note', 'maxLength', `note must be a string of at most ${MAX_NOTE_LENGTH} characters`);
  }
  const seed = input.seed ?? null;
  if (seed !== null && (!Number.isInteger(seed) || seed < 0 || seed > SEED_MAX)) {
    throw invalidRequest('seed', 'out_of_range', `seed must be an integer from 0 to ${SEED_MAX}`);
  }
  const outputFormat = input.outputFormat ?? 'png';
  if (!OUTPUT_FORMATS.includes(outputFormat)) throw invalidRequest('outputFormat', 'isIn', 'outputFormat must be png, jpeg or webp');
  const tier = input.tier ?? 'standard';
  if (!BATCH_TIERS.includes(tier)) throw invalidRequest('tier', 'isIn', 'tier must be standard or economy');
  const deadline = checkDeadline(input.deadline ?? null, tier, now);

  const refMode = input.refMode ?? CATALOG_DEFAULTS.refMode;
  if (!REF_MODES.includes(refMode)) throw invalidRequest('refMode', 'isIn', 'refMode must be none, each or combined');
  const refImages = input.refImages ?? [];
  if (!Array.isArray(refImages)) throw invalidRequest('refImages', 'isArray', 'refImages must be an array of strings');
  // A repeated reference adds nothing to a `combined` render but its decoding cost, and to
  // an `each` batch only copies that countPerCombo already makes: refused, so the number of
  // references is the number of distinct uploads the model's cap counts.
  const seen = new Set<string>();
  refImages.forEach((r, i) => {
    if (typeof r !== 'string') throw invalidRequest(`refImages[${i}]`, 'isString', `refImages[${i}] must be a string`);
    if (seen.has(r)) throw invalidRequest(`refImages[${i}]`, 'duplicate', `refImages[${i}] repeats an earlier reference`);
    seen.add(r);
  });
  if (refMode === 'none' && refImages.length > 0) {
    throw invalidRequest('refImages', 'not_allowed_with_ref_mode_none', 'refImages must be empty when refMode is "none"');
  }
  if (refMode !== 'none' && refImages.length === 0) {
    throw invalidRequest('refImages', 'required_for_ref_mode', `refImages must hold at least one URL when refMode is "${refMode}"`);
  }

  return {
    prompts,
    model: input.model,
    aspectRatio,
    resolution,
    countPerCombo,
    refMode,
    refImages,
    quality,
    background,
    note,
    seed,
    outputFormat,
    tier,
    deadline,
  };
}

/**
 * A deadline is a whole Unix ms time, later than now and at most MAX_DEADLINE_AHEAD_MS
 * ahead. Economy batches take none: their tasks run inside an upstream batch, which no
 * deadline can stop, within the model's own window (the batch's expiresAt).
 */
function checkDeadline(deadline: number | null, tier: BatchTier, now: number): Date | null {
  if (deadline === null) return null;
  if (typeof deadline !== 'number' || !Number.isSafeInteger(deadline)) {
    throw invalidRequest('deadline', 'isInt', 'deadline must be an integer (Unix milliseconds)');
  }
  if (deadline <= now) throw invalidRequest('deadline', 'in_past', 'deadline must be in the future');
  if (deadline > now + MAX_DEADLINE_AHEAD_MS) {
    throw invalidRequest('deadline', 'too_far', 'deadline must be at most 7 days ahead');
  }
  if (tier === 'economy') {
    throw invalidRequest('deadline', 'not_allowed_with_economy', 'deadline is not allowed with tier "economy" (its window bounds it)');
  }
  return new Date(deadline);
}
