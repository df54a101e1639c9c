import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CatalogService } from '@app/catalog';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import type { ModelEntity, OutputFormat, Resolution, TaskErrorCode } from '@app/database';
import { ErrorCode, invalidRequest, KilnError } from '@app/errors';
import { stampStage, timelineNow } from '@app/metrics';
import { pixelSize } from '@app/providers';
import { StorageDriver } from '@app/storage';
import type { IdempotentRequest } from '@app/idempotency';
import { BatchView, selectResultKeys } from '@app/tasks';
import type { Quality } from './batch-request';
import { BatchPolling } from './batch-polling';
import { BatchActor, BatchesService, BatchTask } from './batches.service';

/** The body of OpenAI's `images.generate` / `images.edit`, as Kiln reads it (docs/api.md#openai-compatible-images). */
export interface OpenAiImageRequest {
  model: string;
  prompt: string;
  n?: number;
  size?: string;
  quality?: string;
  background?: string;
  output_format?: string;
  response_format?: string;
}

/**
 * OpenAI's ImagesResponse: what was made, as its gpt-image models describe it. `quality` only
 * when the model takes one and it was named (what `auto` became is not known); `usage` (token
 * counts) is left out: no upstream's counts are kept per image, and none are invented.
 */
export interface OpenAiImagesAnswer {
  created: number;
  data: ({ url: string; revised_prompt?: string } | { b64_json: string })[];
  size: string;
  quality?: 'low' | 'medium' | 'high';
  output_format: OutputFormat;
  background: 'transparent' | 'opaque';
}

/** OpenAI's quality words onto Kiln's (dall-e-3's standard and hd included). */
const QUALITY: Record<string, Quality> = { auto: 'auto', low: 'low', medium: 'medium', high: 'high', standard: 'medium', hd: 'high' };
const OUTPUT_FORMAT: Record<string, OutputFormat> = { png: 'png', jpeg: 'jpeg', jpg: 'jpeg', webp: 'webp' };
const SIZE = /^([1-9]\d{1,4})x([1-9]\d{1,4})$/;
/** Longest a single held poll lasts while the door waits; the batch's changes wake it sooner. */
const HOLD_SECONDS = 30;
/** Between polls when the held-poll cap refuses a hold. */
const FALLBACK_MS = 500;

/**
 * The OpenAI-compatible door: one OpenAI Images request becomes one ordinary batch (charged,
 * refunded and listed as any other), waited for up to OPENAI_COMPAT_WAIT_MS, and answered in
 * OpenAI's shape. Kiln's own rules (prices, limits, validation) apply unchanged.
 */
@Injectable()
export class OpenAiImagesService {
  constructor(
    private readonly batches: BatchesService,
    private readonly polling: BatchPolling,
    private readonly catalog: CatalogService,
    private readonly storage: StorageDriver,
    @InjectDataSource() private readonly db: DataSource,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /**
   * `idempotency` (the request's Idempotency-Key, generations only): a retry of a request
   * whose batch exists (a 504 generation_timeout, a dropped connection) waits for that batch
   * and answers from it, instead of making and charging a second one.
   */
  async generate(
    actor: BatchActor,
    req: OpenAiImageRequest,
    refImages: string[],
    signal?: AbortSignal,
    idempotency: IdempotentRequest | null = null,
  ): Promise<OpenAiImagesAnswer> {
    const receivedAt = timelineNow();
    const responseFormat = req.response_format ?? 'url';
    if (responseFormat !== 'url' && responseFormat !== 'b64_json')
      throw invalidRequest('response_format', 'isIn', 'response_format must be url or b64_json');
    const model = await this.catalog.requireEnabledByOpenAiName(req.model);
    const { created } = await this.batches
      .createOnce(
        actor,
        {
          model: model.key,
          prompts: [req.prompt],
          countPerCombo: req.n ?? 1,
          ...nearestSize(model, req.size),
          ...(req.quality !== undefined && { quality: oneOf(QUALITY, req.quality, 'quality') }),
          ...(req.background === 'transparent' && { background: 'transparent' }),
          ...(req.output_format !== undefined && { outputFormat: oneOf(OUTPUT_FORMAT, req.output_format, 'output_format') }),
          ...(refImages.length && { refMode: 'combined' as const, refImages }),
        },
        idempotency,
      )
      .catch((err: unknown) => {
        // Kiln's content policy refused the prompt: the same answer as an upstream's refusal.
        if (err instanceof KilnError && err.code === ErrorCode.ContentBlocked)
          throw new KilnError(ErrorCode.ModerationBlocked, 'The prompt was refused by the content policy; edit it before asking again');
        throw err;
      });
    stampStage(created.id, 'received', receivedAt);
    const { batch, tasks } = await this.waitForDone(actor, created.id, signal);
    stampStage(created.id, 'detailed');
    const succeeded = tasks.filter((t) => t.status === 'succeeded' && t.resultUrl);
    if (succeeded.length === 0) throw noImageError(created.id, tasks);
    const data = responseFormat === 'url' ? succeeded.map((t) => ({ url: t.resultUrl! })) : await this.inline(created.id, succeeded);
    stampStage(created.id, 'inlined');
    return { created: Math.floor(batch.createdAt.getTime() / 1000), data, ...madeAs(model, batch, succeeded[0]) };
  }

  /** Held polls until the batch is done; past the wait, generation_timeout naming the batch (it goes on). */
  private async waitForDone(actor: BatchActor, batchId: string, signal?: AbortSignal): Promise<{ batch: BatchView; tasks: BatchTask[] }> {
    const deadline = Date.now() + this.config.openaiCompat.waitMs;
    let etag: string | undefined;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) break;
      const answer = await this.polling.poll({
        accountId: actor.accountId,
        batchId,
        ifNoneMatch: etag,
        waitSeconds: Math.max(1, Math.min(HOLD_SECONDS, Math.floor(left / 1000))),
        holder: `openai:${actor.apiKeyId ?? actor.accountId}`,
        signal,
      });
      etag = answer.etag;
      if (!answer.notModified && answer.detail.batch.done) return answer.detail;
      if (answer.waitApplied === null) await new Promise((r) => setTimeout(r, Math.min(FALLBACK_MS, Math.max(0, left))));
    }
    const detail = await this.batches.detail(actor.accountId, batchId);
    if (detail.batch.done) return detail;
    throw new KilnError(
      ErrorCode.GenerationTimeout,
      `The batch was not done within ${this.config.openaiCompat.waitMs} ms; poll GET /v1/batches/${batchId}`,
      { batchId },
    );
  }

  private async inline(batchId: string, tasks: BatchTask[]): Promise<{ b64_json: string }[]> {
    const keys = await selectResultKeys(this.db, batchId);
    return Promise.all(tasks.map(async (t) => ({ b64_json: (await this.storage.get(keys.get(t.id)!)).toString('base64') })));
  }
}

/** Task failures a new request could get past: the upstream's trouble (429, 5xx, timeouts) or Kiln's own. */
const PASSING_FAILURES: ReadonlySet<TaskErrorCode | null> = new Set<TaskErrorCode | null>(['upstream_unavailable', 'internal', null]);

/**
 * No image succeeded (every one refunded). A content refusal among them is OpenAI's
 * 400 moderation_blocked: the one prompt would be refused again. Anything else is Kiln's
 * side (its route, its upstream), a 502 as OpenAI answers its own failures; `retryable`
 * says whether asking again may pass: OpenAI's SDKs retry its 5xx because an overloaded or
 * failing service often recovers, which holds for an upstream that stayed unavailable, but
 * not for a route the upstream rejects or that lacks its key (the filter then sends
 * x-should-retry: false).
 */
function noImageError(batchId: string, tasks: BatchTask[]): KilnError {
  const refused = tasks.find((t) => t.errorCode === 'content_refused');
  if (refused) {
    const message = `The image provider's content policy refused the request (refunded): ${refused.error}`;
    return new KilnError(ErrorCode.ModerationBlocked, message, { batchId });
  }
  const failed = tasks.filter((t) => t.status !== 'succeeded');
  const reason = failed.find((t) => t.error)?.error ?? 'no image was made';
  const retryable = failed.some((t) => PASSING_FAILURES.has(t.errorCode));
  return new KilnError(ErrorCode.GenerationFailed, `No image succeeded (refunded): ${reason}`, { batchId, retryable });
}

/** OpenAI's description of what was made: the stored size, and the quality and background the route was given. */
function madeAs(
  model: Pick<ModelEntity, 'supportsQuality' | 'supportsBackground'>,
  batch: Pick<BatchView, 'quality' | 'background' | 'outputFormat'>,
  image: BatchTask,
): Omit<OpenAiImagesAnswer, 'created' | 'data'> {
  const quality = model.supportsQuality ? MADE_QUALITY[batch.quality] : undefined;
  return {
    size: `${image.resultWidth}x${image.resultHeight}`,
    ...(quality && { quality }),
    output_format: batch.outputFormat,
    background: model.supportsBackground && batch.background === 'transparent' ? 'transparent' : 'opaque',
  };
}

/** Kiln's qualities OpenAI names in an answer (it resolves `auto` before answering; Kiln cannot know what it became). */
const MADE_QUALITY: Record<string, 'low' | 'medium' | 'high' | undefined> = { low: 'low', medium: 'medium', high: 'high' };

function oneOf<T>(table: Record<string, T>, value: unknown, param: string): T {
  const found = typeof value === 'string' ? table[value] : undefined;
  if (found === undefined) throw invalidRequest(param, 'isIn', `${param} must be one of ${Object.keys(table).join(', ')}`);
  return found;
}

/**
 * `WxH` onto the model's legal (aspect ratio, resolution) pair whose pixel size is nearest
 * (closest shape first, then closest area); `auto` or nothing: the catalog's defaults.
 */
export function nearestSize(
  model: Pick<ModelEntity, 'resolutionsByRatio'>,
  size: string | undefined,
): { aspectRatio?: string; resolution?: Resolution } {
  if (size === undefined || size === 'auto') return {};
  const m = SIZE.exec(size);
  if (!m) throw invalidRequest('size', 'matches', 'size must be WxH (such as 1024x1024) or auto');
  const [w, h] = [Number(m[1]), Number(m[2])];
  let best: { aspectRatio: string; resolution: Resolution; distance: number } | null = null;
  for (const [aspectRatio, resolutions] of Object.entries(model.resolutionsByRatio)) {
    for (const resolution of resolutions) {
      const px = pixelSize(aspectRatio, resolution);
      const distance = Math.abs(Math.log(px.width / px.height / (w / h))) * 1000 + Math.abs(Math.log((px.width * px.height) / (w * h)));
      if (!best || distance < best.distance) best = { aspectRatio, resolution, distance };
    }
  }
  if (!best) throw invalidRequest('size', 'no_legal_size', 'The model offers no size');
  return { aspectRatio: best.aspectRatio, resolution: best.resolution };
}
