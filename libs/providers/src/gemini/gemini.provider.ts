import { EgressPolicy } from '@app/egress';
import { ImageProvider, ProviderError, RenderRequest, RenderResult } from '../render.types';
import { geminiUsageOf } from './gemini.usage';
import { reportProgress, throwIfAborted } from '../provider.utils';
import { checkedImage, postForImagePayload, upstreamPolicies } from '../upstream-http';
import { classifyGeminiError, geminiNoImage } from './gemini.errors';
import { geminiImageConfig } from './gemini.sizes';

export interface GeminiProviderConfig {
  /** e.g. https://generativelanguage.googleapis.com/v1beta (a trailing slash is tolerated). */
  baseUrl: string;
  apiKey: string;
  /** Upstream model id, e.g. gemini-3.1-flash-image. */
  model: string;
  timeoutMs: number;
  /** As OpenAiProviderConfig's: http and private addresses for the base URL (UPSTREAM_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  maxImageBytes: number;
}

/** The answer fields Kiln reads (REST JSON, camelCase). */
export interface GenerateContentAnswer {
  promptFeedback?: { blockReason?: unknown };
  candidates?: {
    finishReason?: unknown;
    content?: { parts?: { text?: unknown; inlineData?: { mimeType?: unknown; data?: unknown } }[] };
  }[];
}

/**
 * Google's Gemini API: one `generateContent` call per image, the prompt as text and each
 * reference as inlineData, asking for an IMAGE answer in the nearest ratio Gemini takes (and
 * imageSize on 3.x models). The image comes back inline (base64), so no URL is ever fetched.
 */
export class GeminiProvider implements ImageProvider {
  private readonly baseUrl: string;
  private readonly apiPolicy: EgressPolicy;

  constructor(private readonly config: GeminiProviderConfig) {
    this.baseUrl = config.baseUrl.replace(/\/+$/, '');
    this.apiPolicy = upstreamPolicies(this.baseUrl, config.allowPrivate).api;
  }

  /** The request body for a render: exported through `requestBody` for the SDK comparison test. */
  requestBody(req: RenderRequest): Record<string, unknown> {
    return geminiRequestBody(this.config.model, req);
  }

  async render(req: RenderRequest): Promise<RenderResult> {
    throwIfAborted(req.signal);
    const url = `${this.baseUrl}/models/${encodeURIComponent(this.config.model)}:generateContent`;
    const body = Buffer.from(JSON.stringify(this.requestBody(req)));
    const answer = await postForImagePayload({
      url,
      policy: this.apiPolicy,
      headers: { 'x-goog-api-key': this.config.apiKey, 'content-type': 'application/json' },
      body,
      config: this.config,
      signal: req.signal,
      classify: classifyGeminiError,
    });
    reportProgress(req.onProgress, 60);
    const parsed = parseAnswer(answer.payload);
    const image = await checkedImage(inlineImageOf(parsed), this.config.maxImageBytes);
    reportProgress(req.onProgress, 70);
    // The tokens the answer reports, which price the image where the route's rule has token prices.
    const usage = geminiUsageOf(parsed);
    return usage ? { ...image, usage } : image;
  }
}

/**
 * A render's generateContent request (also each line's `request` in the batch API,
 * gemini.batch.ts): the prompt as text, each reference as inlineData, an IMAGE answer in the
 * nearest ratio Gemini takes (and imageSize on 3.x models).
 */
export function geminiRequestBody(
  model: string,
  req: Pick<RenderRequest, 'prompt' | 'seed' | 'width' | 'height' | 'resolution' | 'references'>,
): Record<string, unknown> {
  const parts: Record<string, unknown>[] = [{ text: req.prompt }];
  for (const ref of req.references) parts.push({ inlineData: { mimeType: ref.contentType, data: ref.data.toString('base64') } });
  return {
    contents: [{ role: 'user', parts }],
    generationConfig: {
      responseModalities: ['IMAGE'],
      seed: req.seed,
      imageConfig: geminiImageConfig(model, { width: req.width, height: req.height }, req.resolution),
    },
  };
}

function parseAnswer(payload: string): GenerateContentAnswer {
  try {
    return JSON.parse(payload) as GenerateContentAnswer;
  } catch {
    throw new ProviderError('invalid_response', 'The image provider answered with something other than JSON');
  }
}

/** The image of a parsed generateContent answer (the first part with inlineData: a model may answer text parts around it), or its refusal / missing image as a ProviderError. */
export function inlineImageOf(answer: GenerateContentAnswer): Buffer {
  const parts = answer?.candidates?.[0]?.content?.parts;
  const image = Array.isArray(parts)
    ? parts.find((p) => typeof p?.inlineData?.data === 'string' && p.inlineData.data.length > 0)
    : undefined;
  if (!image) throw geminiNoImage(answer ?? {});
  return Buffer.from(image.inlineData!.data as string, 'base64');
}
