import type { ProviderError, RenderRequest, RenderResult } from './render.types';

/**
 * An upstream's batch API, for the economy tier (half price, results within a window): each
 * type with a batch API implements it in its folder (`<type>.batch.ts`); the `simulated`
 * type's is local.
 *
 * The generator's collector gathers a route's waiting economy tasks into one upstream batch
 * and drives it through these steps, recording each answer in PostgreSQL (through
 * libs/tasks) BEFORE it takes the next one, so a crash at any step never submits a task
 * twice and never loses one:
 *
 * 1. `encodeLine` each task (the key is the task id) and `uploadInput` the lines. A crash
 *    after the upload leaves an input nobody uses: harmless, it is never billed.
 * 2. `createBatch` with the group id Kiln recorded before the call. A crash between the
 *    upstream's create and Kiln's record is the one window where the upstream holds a batch
 *    Kiln does not know: `findBatch(group)` finds it again by the group id the batch carries
 *    (OpenAI `metadata`, Gemini `displayName`).
 * 3. `poll` at the route's `pollIntervalMs`, answered at once, never waiting for the end.
 * 4. Once ended, `results` streams every line's outcome, in whatever order the upstream
 *    wrote them, one line at a time: a 10,000-image output file never sits in memory whole.
 *
 * Providers stay pure (render.types.ts): no database, no queue, no configuration reads.
 * Failures of the calls themselves are ProviderErrors (`retryable` as for renders); a
 * line's own failure is a result with `ok: false` (a content refusal is kind
 * `content_refused`).
 */
export interface UpstreamBatchApi {
  /** Most lines one upstream batch takes (OpenAI 50,000), before the route's `maxRequests`. */
  readonly maxLines: number;
  /** Most bytes of encoded input one upstream batch takes (OpenAI 200 MB; Gemini inline 20 MB). */
  readonly maxInputBytes: number;
  /** The route's poll interval (its `batch.pollIntervalMs`). */
  readonly pollIntervalMs: number;
  /** One task as one line of the upstream's JSONL input (no trailing newline); its length counts toward maxInputBytes. */
  encodeLine(line: UpstreamBatchLine): string;
  /** Step 1: uploads the encoded lines as the batch's input. */
  uploadInput(lines: readonly string[], group: string, signal?: AbortSignal): Promise<{ inputId: string }>;
  /** Step 2: creates the batch over an uploaded input, tagged with Kiln's group id. */
  createBatch(inputId: string, group: string, signal?: AbortSignal): Promise<UpstreamBatchRef>;
  /** After a crash between step 2 and its record: the batch created for this group, or null when none was. */
  findBatch(group: string, signal?: AbortSignal): Promise<UpstreamBatchRef | null>;
  /** Step 3: one status check, answered at once. Passing trouble of the poll itself answers `waiting`. */
  poll(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<UpstreamBatchStatus>;
  /** Step 4: every line's outcome, any order; call only once `poll` answered `ended`, with what it answered. */
  results(
    ref: UpstreamBatchRef,
    ended: Extract<UpstreamBatchStatus, { state: 'ended' }>,
    signal?: AbortSignal,
  ): AsyncIterable<UpstreamBatchResult>;
  /** Asks the upstream to stop the batch (lines already done are still delivered by `results`). */
  cancel(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<void>;
}

/** One task in an upstream batch. */
export interface UpstreamBatchLine {
  /** Kiln's task id: the upstream's `custom_id` (OpenAI) or `key` (Gemini); results are matched back by it. */
  key: string;
  request: Omit<RenderRequest, 'signal' | 'onProgress'>;
}

/** What is persisted for a created upstream batch: plain JSON, so it survives in a jsonb column. */
export interface UpstreamBatchRef {
  /** The upstream's own batch id (OpenAI `batch_...`, Gemini `batches/...`). */
  batchId: string;
  /** Anything later calls need (input file id, ...). */
  state: Record<string, string>;
}

export type UpstreamBatchStatus =
  | {
      state: 'waiting';
      upstreamStatus: string;
      /** Lines done so far, when the upstream says. */ completed?: number;
      retryAfterMs?: number;
    }
  | {
      state: 'ended';
      upstreamStatus: string;
      /**
       * completed: every line has an outcome in `results`. expired, failed, cancelled: the
       * lines `results` does not deliver never ran (Kiln fails and refunds them; OpenAI still
       * delivers and bills what it finished before the end).
       */
      outcome: 'completed' | 'expired' | 'failed' | 'cancelled';
      /** Where the results are (OpenAI output_file_id / error_file_id, Gemini responsesFile). */
      found: Record<string, string>;
    };

export type UpstreamBatchResult = { key: string; ok: true; image: RenderResult } | { key: string; ok: false; error: ProviderError };

/** A route's `batch` settings (spec section 4), with their defaults applied. */
export interface RouteBatchSettings {
  enabled: boolean;
  /** Waiting economy tasks are gathered at most this long before an upstream batch is made. */
  collectMs: number;
  /** Most lines per upstream batch (never more than the API's own maxLines). */
  maxRequests: number;
  pollIntervalMs: number;
  /** simulated only: how long its local batch API takes to end a batch. */
  delayMs?: number;
}

export const BATCH_DEFAULTS = { collectMs: 60_000, maxRequests: 50_000, pollIntervalMs: 30_000 } as const;

/** A route's `batch` setting with BATCH_DEFAULTS applied; null when absent or not enabled. */
export function routeBatchSettings(route: unknown): RouteBatchSettings | null {
  const b = (route as { batch?: Partial<RouteBatchSettings> } | null | undefined)?.batch;
  if (!b || typeof b !== 'object' || b.enabled !== true) return null;
  return {
    enabled: true,
    collectMs: b.collectMs ?? BATCH_DEFAULTS.collectMs,
    maxRequests: b.maxRequests ?? BATCH_DEFAULTS.maxRequests,
    pollIntervalMs: b.pollIntervalMs ?? BATCH_DEFAULTS.pollIntervalMs,
    ...(b.delayMs !== undefined ? { delayMs: b.delayMs } : {}),
  };
}

/**
 * Where a local batch API (the simulated type's) keeps its files and batches, so they outlive
 * the generator that made them and every generator sees them: the generator passes Kiln's
 * object storage under a reserved prefix (ProviderContext.batchObjects). Keys are relative
 * (`simulated/...`).
 */
export interface BatchObjectStore {
  put(key: string, body: Buffer): Promise<void>;
  /** null when nothing is stored under the key. */
  get(key: string): Promise<Buffer | null>;
  remove(key: string): Promise<void>;
}
