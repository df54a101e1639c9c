import type { CapturedRequest, FakeAnswer } from '../fake-upstream';
import { fakePng, FakeHttpUpstream, json } from '../fake-upstream';

/**
 * An OpenAI images endpoint on 127.0.0.1 (baseUrl ends in /v1): /images/generations (JSON)
 * and /images/edits (multipart) answer `data[0].b64_json`, a PNG of the asked `size`
 * (1024x1024 when the size is not WxH), and `usage` as GPT image models report it (the
 * output image tokens OpenAI publishes for the size and quality; auto as medium).
 */
export class OpenAiFakeUpstream extends FakeHttpUpstream {
  constructor() {
    super('/v1');
  }

  protected async defaultAnswer(req: CapturedRequest): Promise<FakeAnswer> {
    if (req.method !== 'POST' || !/^\/v1\/images\/(generations|edits)$/.test(req.path))
      return json(404, { error: { message: 'not found' } });
    const size = sizeOf(req);
    const png = await fakePng(size.width, size.height);
    return json(200, { created: Math.floor(Date.now() / 1000), data: [{ b64_json: png.toString('base64') }], usage: usageOf(req, size) });
  }

  /** The OpenAI content refusal, as its API answers it. */
  static refusal(code: 'moderation_blocked' | 'content_policy_violation' = 'moderation_blocked'): FakeAnswer {
    return json(400, { error: { type: 'image_generation_user_error', code, message: 'Your request was rejected by the safety system.' } });
  }
}

function sizeOf(req: CapturedRequest): { width: number; height: number } {
  const type = String(req.headers['content-type'] ?? '');
  let size: string | undefined;
  if (type.startsWith('application/json')) {
    size = (JSON.parse(req.body.toString('utf8')) as { size?: string }).size;
  } else {
    size = /name="size"\r\n\r\n([^\r]*)/.exec(req.body.toString('latin1'))?.[1];
  }
  const m = /^(\d+)x(\d+)$/.exec(size ?? '');
  return m ? { width: Math.min(Number(m[1]), 4096), height: Math.min(Number(m[2]), 4096) } : { width: 1024, height: 1024 };
}

/** Output image tokens of GPT image models by quality and size, as OpenAI publishes them. */
const OUTPUT_TOKENS: Record<string, Record<string, number>> = {
  low: { '1024x1024': 272, '1024x1536': 408, '1536x1024': 400 },
  medium: { '1024x1024': 1056, '1024x1536': 1584, '1536x1024': 1568 },
  high: { '1024x1024': 4160, '1024x1536': 6240, '1536x1024': 6208 },
};

function usageOf(req: CapturedRequest, size: { width: number; height: number }) {
  const type = String(req.headers['content-type'] ?? '');
  const quality = type.startsWith('application/json')
    ? (JSON.parse(req.body.toString('utf8')) as { quality?: string }).quality
    : /name="quality"\r\n\r\n([^\r]*)/.exec(req.body.toString('latin1'))?.[1];
  const output = OUTPUT_TOKENS[quality && quality !== 'auto' ? quality : 'medium']?.[`${size.width}x${size.height}`] ?? 1056;
  const text = 20;
  return {
    total_tokens: text + output,
    input_tokens: text,
    output_tokens: output,
    input_tokens_details: { text_tokens: text, image_tokens: 0 },
  };
}
