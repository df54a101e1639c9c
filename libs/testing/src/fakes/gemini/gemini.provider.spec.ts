import sharp from 'sharp';
import { GeminiProvider, pixelSize, ProviderError, RenderRequest } from '@app/providers';
import { json } from '../fake-upstream';
import { GeminiFakeUpstream } from './gemini.fake';

const API_KEY = 'gm-test-secret-0123456789';
const fake = new GeminiFakeUpstream();

beforeAll(() => fake.start());
afterAll(() => fake.stop());
beforeEach(() => fake.requests.splice(0));

function provider(overrides: Partial<ConstructorParameters<typeof GeminiProvider>[0]> = {}): GeminiProvider {
  return new GeminiProvider({
    baseUrl: fake.baseUrl,
    apiKey: API_KEY,
    model: 'gemini-3.1-flash-image',
    timeoutMs: 5000,
    allowPrivate: true, // the fake upstream is on 127.0.0.1
    maxImageBytes: 8 * 1024 * 1024,
    ...overrides,
  });
}

function request(overrides: Partial<RenderRequest> = {}): RenderRequest {
  return {
    prompt: 'A lighthouse',
    seed: 42,
    ...pixelSize('16:9', '2K'),
    resolution: '2K',
    aspectRatio: '16:9',
    quality: null,
    background: null,
    references: [],
    ...overrides,
  };
}

const bodyOf = (i = 0) => JSON.parse(fake.requests[i].body.toString('utf8'));

describe('GeminiProvider', () => {
  it('sends generateContent with the key header, prompt, references as inlineData and the image config', async () => {
    const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ff0000' } })
      .png()
      .toBuffer();
    const jpeg = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#00ff00' } })
      .jpeg()
      .toBuffer();
    const result = await provider().render(
      request({
        references: [
          { data: png, contentType: 'image/png' },
          { data: jpeg, contentType: 'image/jpeg' },
        ],
      }),
    );
    const [seen] = fake.requests;
    expect(seen.method).toBe('POST');
    expect(seen.path).toBe('/v1beta/models/gemini-3.1-flash-image:generateContent');
    expect(seen.headers['x-goog-api-key']).toBe(API_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    expect(bodyOf()).toEqual({
      contents: [
        {
          role: 'user',
          parts: [
            { text: 'A lighthouse' },
            { inlineData: { mimeType: 'image/png', data: png.toString('base64') } },
            { inlineData: { mimeType: 'image/jpeg', data: jpeg.toString('base64') } },
          ],
        },
      ],
      generationConfig: { responseModalities: ['IMAGE'], seed: 42, imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
    });
    // The fake answers 1/8 of Gemini's 16:9 1K size: what came back is what is reported.
    expect(result).toMatchObject({ contentType: 'image/png', width: 168, height: 96 });
  });

  it("carries the answer's usageMetadata as token usage, which prices the image", async () => {
    const result = await provider().render(request({ ...pixelSize('1:1', '1K'), resolution: '1K', aspectRatio: '1:1' }));
    expect(result.usage).toEqual({ inputTextTokens: 12, inputImageTokens: 0, outputImageTokens: 1120, outputTextTokens: 6 });
  });

  it('older models get the ratio alone (no imageSize)', async () => {
    await provider({ model: 'gemini-2.5-flash-image' }).render(request());
    expect(bodyOf().generationConfig.imageConfig).toEqual({ aspectRatio: '16:9' });
  });

  it.each([
    ['promptFeedback.blockReason', GeminiFakeUpstream.blocked('PROHIBITED_CONTENT'), 'PROHIBITED_CONTENT'],
    ...['SAFETY', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT'].map((r) => [
      `finishReason ${r}`,
      GeminiFakeUpstream.finished(r),
      r,
    ]),
  ])('a refusal by %s is content_refused, not retryable', async (_what, answer, code) => {
    fake.answerNext(answer as ReturnType<typeof json>);
    const err = await provider()
      .render(request())
      .catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'content_refused', retryable: false, upstreamCode: code });
  });

  it('an answer without an image (text only, NO_IMAGE) or with bytes that are not an image is invalid_response', async () => {
    fake.answerNext(json(200, { candidates: [{ content: { parts: [{ text: 'I cannot draw that.' }] }, finishReason: 'STOP' }] }));
    await expect(provider().render(request())).rejects.toMatchObject({
      kind: 'invalid_response',
      message: 'The image provider answered without an image (finishReason STOP)',
    });
    fake.answerNext(GeminiFakeUpstream.finished('NO_IMAGE'));
    await expect(provider().render(request())).rejects.toMatchObject({ kind: 'invalid_response', upstreamCode: 'NO_IMAGE' });
    fake.answerNext(GeminiFakeUpstream.image(Buffer.from('<html>not an image</html>')));
    await expect(provider().render(request())).rejects.toMatchObject({
      kind: 'invalid_response',
      message: 'The image provider returned data that is not a PNG, JPEG or WebP image',
    });
  });

  it('429 is rate_limited with Retry-After, or with the RetryInfo delay', async () => {
    fake.answerNext(
      json(429, { error: { code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' } }, { 'retry-after': '7' }),
    );
    await expect(provider().render(request())).rejects.toMatchObject({
      kind: 'rate_limited',
      retryable: true,
      retryAfterMs: 7000,
      status: 429,
    });
    fake.answerNext(
      json(429, {
        error: {
          code: 429,
          message: 'Quota',
          status: 'RESOURCE_EXHAUSTED',
          details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '12s' }],
        },
      }),
    );
    await expect(provider().render(request())).rejects.toMatchObject({
      kind: 'rate_limited',
      retryAfterMs: 12000,
      upstreamCode: 'RESOURCE_EXHAUSTED',
    });
  });

  it('5xx and timeouts are retryable; a 400 is not, and never quotes the key', async () => {
    fake.answerNext(json(503, { error: { code: 503, message: 'The model is overloaded', status: 'UNAVAILABLE' } }));
    await expect(provider().render(request())).rejects.toMatchObject({ kind: 'upstream_error', retryable: true, status: 503 });
    fake.answerNext('hang');
    await expect(provider({ timeoutMs: 200 }).render(request())).rejects.toMatchObject({ kind: 'timeout', retryable: true });
    fake.answerNext(json(400, { error: { code: 400, message: `API key ${API_KEY} not valid`, status: 'INVALID_ARGUMENT' } }));
    const err = await provider()
      .render(request())
      .catch((e) => e);
    expect(err).toMatchObject({ kind: 'bad_request', retryable: false, status: 400 });
    expect(err.message).not.toContain(API_KEY);
  });
});
