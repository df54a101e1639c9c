import { nearestSize } from './openai-images';

describe("OpenAI sizes onto a model's legal pairs", () => {
  const model = { resolutionsByRatio: { '1:1': ['1K', '2K'], '16:9': ['1K', '2K', '4K'], '3:2': ['1K'], '2:3': ['1K'] } } as any;

  it('keeps the shape first, then the nearest area; auto or nothing leaves the defaults', () => {
    expect(nearestSize(model, '1024x1024')).toEqual({ aspectRatio: '1:1', resolution: '1K' });
    expect(nearestSize(model, '2048x2048')).toEqual({ aspectRatio: '1:1', resolution: '2K' });
    expect(nearestSize(model, '1536x1024')).toEqual({ aspectRatio: '3:2', resolution: '1K' });
    expect(nearestSize(model, '1024x1536')).toEqual({ aspectRatio: '2:3', resolution: '1K' });
    expect(nearestSize(model, '1792x1024')).toEqual({ aspectRatio: '16:9', resolution: '1K' });
    expect(nearestSize(model, '3840x2160')).toEqual({ aspectRatio: '16:9', resolution: '4K' });
    expect(nearestSize(model, 'auto')).toEqual({});
    expect(nearestSize(model, undefined)).toEqual({});
  });

  it('refuses a size that is not WxH as invalid_request on size', () => {
    for (const bad of ['big', '1024', '0x10', '1024x', '-5x5']) {
      expect(() => nearestSize(model, bad)).toThrow(
        expect.objectContaining({ code: 'invalid_request', details: expect.objectContaining({ field: 'size' }) }),
      );
    }
  });
});
