import { pixelSize } from '../image-size';
import { classifyOpenAiError } from './openai.errors';
import { openAiMadeSize, openAiUpstreamSize } from './openai.sizes';

describe('openai sizes', () => {
  it('gpt-image-1 models get their nearest legal size without a sizeMap', () => {
    for (const model of ['gpt-image-1', 'gpt-image-1-mini', 'gpt-image-1.5']) {
      expect(openAiUpstreamSize({ model }, pixelSize('16:9', '1K'))).toBe('1536x1024');
      expect(openAiUpstreamSize({ model }, pixelSize('2:3', '2K'))).toBe('1024x1536');
      expect(openAiUpstreamSize({ model }, pixelSize('1:1', '4K'))).toBe('1024x1024');
    }
  });

  it('a sizeMap entry still overrides, and other sizes keep the rule', () => {
    const route = { model: 'gpt-image-1', sizeMap: { '1360x768': 'auto' } };
    expect(openAiUpstreamSize(route, { width: 1360, height: 768 })).toBe('auto');
    expect(openAiMadeSize(route, { width: 1360, height: 768 })).toBeNull();
    expect(openAiUpstreamSize(route, pixelSize('1:1', '1K'))).toBe('1024x1024');
  });

  it('other models get the exact size; gpt-image-2 is scaled down only past its limits', () => {
    expect(openAiUpstreamSize({ model: 'up-image-1' }, { width: 1360, height: 768 })).toBe('1360x768');
    expect(openAiUpstreamSize({ model: 'gpt-image-2' }, pixelSize('16:9', '2K'))).toBe('2736x1536');
    const big = openAiMadeSize({ model: 'gpt-image-2' }, pixelSize('1:1', '4K'))!;
    expect(big.width).toBe(big.height);
    expect(big.width * big.height).toBeLessThanOrEqual(3840 * 2160);
    expect(big.width % 16).toBe(0);
  });
});

describe('openai refusals', () => {
  const answer = (status: number, body: unknown) => ({ status, headers: new Headers(), text: JSON.stringify(body) });

  it.each(['moderation_blocked', 'content_policy_violation'])('%s is content_refused, not retried', (code) => {
    const err = classifyOpenAiError(
      answer(400, { error: { type: 'image_generation_user_error', code, message: 'Rejected by the safety system' } }),
      {
        apiKey: 'sk',
      },
    );
    expect(err).toMatchObject({ kind: 'content_refused', retryable: false, status: 400, upstreamCode: code });
  });

  it('any other 400 stays bad_request', () => {
    expect(classifyOpenAiError(answer(400, { error: { code: 'invalid_value', message: 'bad size' } }), { apiKey: 'sk' })).toMatchObject({
      kind: 'bad_request',
      retryable: false,
    });
  });
});
