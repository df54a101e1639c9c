import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CatalogService } from '@app/catalog';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import type { ModelEntity, OutputFormat, Resolution } from '@app/database';
import { ErrorCode, invalidRequest, KilnError } from '@app/errors';
import { pixelSize } from '@app/providers';
import { StorageDriver } from '@app/storage';
import { selectResultKeys } from '@app/tasks';
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

export interface OpenAiImagesAnswer {
  created: number;
  data: ({ url: string; revised_prompt?: string } | { b64_json: string })[];
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

  async generate(actor: BatchActor, req: OpenAiImageRequest, refImages: string[], signal?: AbortSignal): Promise<OpenAiImagesAnswer> {
    const responseFormat = req.response_format ?? 'url';
    if (responseFormat !== 'url' && responseFormat !== 'b64_json') throw invalidRequest('response_format', 'isIn', 'response_format must be url or b64_json');
    const model = await this.catalog.requireEnabled(req.model);
    const created = await this.batches.create(actor, {
      model: model.key,
      prompts: [req.prompt],
      countPerCombo: req.n ?? 1,
      ...nearestSize(model, req.size),
      ...(req.quality !== undefined && { quality: oneOf(QUALITY, req.quality, 'quality') }),
      ...(req.background === 'transparent' && { background: 'transparent' }),
      ...(req.output_format !== undefined && { outputFormat: oneOf(OUTPUT_FORMAT, req.output_format, 'output_format') }),
      ...(refImages.length && { refMode: 'combined' as const, refImages }),
    });
    const tasks = await this.waitForDone(actor, created.id, signal);
    const succeeded = tasks.filter((t) => t.status === 'succeeded' && t.resultUrl);
    if (succeeded.length === 0) {
      const reason = tasks.find((t) => t.error)?.error ?? 'no image was made';
      throw new KilnError(ErrorCode.GenerationFailed, `No image succeeded (refunded): ${reason}`, { batchId: created.id });
    }
    const data =
      responseFormat === 'url'
        ? succeeded.map((t) => ({ url: t.resultUrl! }))
        : await this.inline(created.id, succeeded);
    return { created: Math.floor(created.createdAt.getTime() / 1000), data };
  }

  /** Held polls until the batch is done; past the wait, generation_timeout naming the batch (it goes on). */
  private async waitForDone(actor: BatchActor, batchId: string, signal?: AbortSignal): Promise<BatchTask[]> {
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
      if (!answer.notModified && answer.detail.batch.done) return answer.detail.tasks;
      if (answer.waitApplied === null) await new Promise((r) => setTimeout(r, Math.min(FALLBACK_MS, Math.max(0, left))));
    }
    const detail = await this.batches.detail(actor.accountId, batchId);
    if (detail.batch.done) return detail.tasks;
    throw new KilnError(ErrorCode.GenerationTimeout, `The batch was not done within ${this.config.openaiCompat.waitMs} ms; poll GET /v1/batches/${batchId}`, { batchId });
  }

  private async inline(batchId: string, tasks: BatchTask[]): Promise<{ b64_json: string }[]> {
    const keys = await selectResultKeys(this.db, batchId);
    return Promise.all(tasks.map(async (t) => ({ b64_json: (await this.storage.get(keys.get(t.id)!)).toString('base64') })));
  }
}

function oneOf<T>(table: Record<string, T>, value: unknown, param: string): T {
  const found = typeof value === 'string' ? table[value] : undefined;
  if (found === undefined) throw invalidRequest(param, 'isIn', `${param} must be one of ${Object.keys(table).join(', ')}`);
  return found;
}

/**
 * `WxH` onto the model's legal (aspect ratio, resolution) pair whose pixel size is nearest
 * (closest shape first, then closest area); `auto` or nothing: the catalog's defaults.
 */
export function nearestSize(model: Pick<ModelEntity, 'resolutionsByRatio'>, size: string | undefined): { aspectRatio?: string; resolution?: Resolution } {
  if (size === undefined || size === 'auto') return {};
  const m = SIZE.exec(size);
  if (!m) throw invalidRequest('size', 'matches', 'size must be WxH (such as 1024x1024) or auto');
  const [w, h] = [Number(m[1]), Number(m[2])];
  let best: { aspectRatio: string; resolution: Resolution; distance: number } | null = null;
  for (const [aspectRatio, resolutions] of Object.entries(model.resolutionsByRatio)) {
    for (const resolution of resolutions) {
      const px = pixelSize(aspectRatio, resolution);
      const distance = Math.abs(Math.log((px.width / px.height) / (w / h))) * 1000 + Math.abs(Math.log((px.width * px.height) / (w * h)));
      if (!best || distance < best.distance) best = { aspectRatio, resolution, distance };
    }
  }
  if (!best) throw invalidRequest('size', 'no_legal_size', "The model offers no size");
  return { aspectRatio: best.aspectRatio, resolution: best.resolution };
}
