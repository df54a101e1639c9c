import { pixelSize } from '../image-size';
import { geminiImageConfig, geminiMadeSize } from './gemini.sizes';

describe('gemini sizes', () => {
  it('takes the nearest of its ratios, imageSize on 3.x models', () => {
    expect(geminiImageConfig('gemini-3.1-flash-image', pixelSize('16:9', '1K'), '1K')).toEqual({ aspectRatio: '16:9', imageSize: '1K' });
    expect(geminiImageConfig('gemini-3-pro-image', { width: 1000, height: 1010 }, '4K')).toEqual({ aspectRatio: '1:1', imageSize: '4K' });
    expect(geminiImageConfig('gemini-2.5-flash-image', pixelSize('21:9', '2K'), '2K')).toEqual({ aspectRatio: '21:9' });
  });

  it('says what it makes: 16:9 at 1K is 1344x768, twice that at 2K; 1K only on older models', () => {
    expect(geminiMadeSize('gemini-3.1-flash-image', pixelSize('16:9', '1K'), '1K')).toEqual({ width: 1344, height: 768 });
    expect(geminiMadeSize('gemini-3.1-flash-image', pixelSize('16:9', '2K'), '2K')).toEqual({ width: 2688, height: 1536 });
    expect(geminiMadeSize('gemini-2.5-flash-image', pixelSize('1:1', '2K'), '2K')).toEqual({ width: 1024, height: 1024 });
  });
});
