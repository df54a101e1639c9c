import type { CapturedRequest, FakeAnswer } from '../fake-upstream';
import { fakePng, FakeHttpUpstream, json } from '../fake-upstream';

const SIZE_1K: Record<string, [number, number]> = {
  '1:1': [1024, 1024],
  '2:3': [832, 1248],
  '3:2': [1248, 832],
  '3:4': [864, 1184],
  '4:3': [1184, 864],
  '4:5': [896, 1152],
  '5:4': [1152, 896],
  '9:16': [768, 1344],
  '16:9': [1344, 768],
  '21:9': [1536, 672],
};

/**
 * Google's Gemini API on 127.0.0.1 (baseUrl ends in /v1beta): generateContent answers a
 * candidate with a text part and an inlineData PNG of the asked aspectRatio, at 1/8 of the
 * real pixel size (so tests stay fast; a test that needs the real size asks with answerNext).
 */
export class GeminiFakeUpstream extends FakeHttpUpstream {
  constructor() {
    super('/v1beta');
  }

  protected async defaultAnswer(req: CapturedRequest): Promise<FakeAnswer> {
    if (req.method !== 'POST' || !/^\/v1beta\/models\/[^/]+:generateContent$/.test(req.path)) {
      return json(404, { error: { code: 404, message: 'not found', status: 'NOT_FOUND' } });
    }
    const config = (JSON.parse(req.body.toString('utf8')) as { generationConfig?: { imageConfig?: { aspectRatio?: string } } })
      .generationConfig;
    const [w, h] = SIZE_1K[config?.imageConfig?.aspectRatio ?? '1:1'] ?? SIZE_1K['1:1'];
    return GeminiFakeUpstream.image(await fakePng(w / 8, h / 8));
  }

  /** A success carrying this image. */
  static image(png: Buffer): FakeAnswer {
    return json(200, {
      candidates: [
        {
          content: {
            role: 'model',
            parts: [{ text: 'Here is your image.' }, { inlineData: { mimeType: 'image/png', data: png.toString('base64') } }],
          },
          finishReason: 'STOP',
        },
      ],
      // As Gemini reports it: a 1K image is 1120 output image tokens.
      usageMetadata: {
        promptTokenCount: 12,
        candidatesTokenCount: 1126,
        totalTokenCount: 1138,
        promptTokensDetails: [{ modality: 'TEXT', tokenCount: 12 }],
        candidatesTokensDetails: [
          { modality: 'TEXT', tokenCount: 6 },
          { modality: 'IMAGE', tokenCount: 1120 },
        ],
      },
    });
  }

  /** The prompt itself blocked: no candidates, promptFeedback.blockReason. */
  static blocked(blockReason = 'PROHIBITED_CONTENT'): FakeAnswer {
    return json(200, { promptFeedback: { blockReason } });
  }

  /** A candidate stopped for a refusal finish reason, with no image. */
  static finished(finishReason: string): FakeAnswer {
    return json(200, { candidates: [{ content: { role: 'model', parts: [] }, finishReason }] });
  }
}
