import { pixelSize } from './image-size';
import { isHonest, nearestSize, parseSize } from './size-rules';

const GPT = [
  { width: 1024, height: 1024 },
  { width: 1536, height: 1024 },
  { width: 1024, height: 1536 },
];

describe('nearestSize', () => {
  it('takes the nearest ratio first', () => {
    expect(nearestSize(pixelSize('16:9', '1K'), GPT)).toEqual({ width: 1536, height: 1024 });
    expect(nearestSize(pixelSize('9:16', '4K'), GPT)).toEqual({ width: 1024, height: 1536 });
    expect(nearestSize(pixelSize('4:3', '1K'), GPT)).toEqual({ width: 1536, height: 1024 });
    expect(nearestSize(pixelSize('1:1', '2K'), GPT)).toEqual({ width: 1024, height: 1024 });
  });

  it('then the nearest area among sizes of that ratio', () => {
    const squares = [
      { width: 512, height: 512 },
      { width: 1024, height: 1024 },
      { width: 2048, height: 2048 },
    ];
    expect(nearestSize({ width: 1900, height: 1900 }, squares)).toEqual({ width: 2048, height: 2048 });
    expect(nearestSize({ width: 600, height: 600 }, squares)).toEqual({ width: 512, height: 512 });
  });

  it('refuses an empty list', () => {
    expect(() => nearestSize({ width: 1, height: 1 }, [])).toThrow(RangeError);
  });
});

describe('isHonest', () => {
  it('accepts the same ratio within 3 % and at least 0.8 x the area', () => {
    expect(isHonest(pixelSize('1:1', '1K'), { width: 1024, height: 1024 })).toBe(true);
    expect(isHonest(pixelSize('3:2', '1K'), { width: 1536, height: 1024 })).toBe(true);
    // Gemini's 16:9 at 1K is 1344x768 for Kiln's 1360x768.
    expect(isHonest(pixelSize('16:9', '1K'), { width: 1344, height: 768 })).toBe(true);
  });

  it('refuses another ratio, or a smaller image than was charged', () => {
    expect(isHonest(pixelSize('16:9', '1K'), { width: 1536, height: 1024 })).toBe(false);
    expect(isHonest(pixelSize('1:1', '2K'), { width: 1024, height: 1024 })).toBe(false);
    expect(isHonest(pixelSize('4:3', '1K'), { width: 1536, height: 1024 })).toBe(false);
  });
});

describe('parseSize', () => {
  it('reads WxH and nothing else', () => {
    expect(parseSize('1536x1024')).toEqual({ width: 1536, height: 1024 });
    expect(parseSize('auto')).toBeNull();
    expect(parseSize('0x10')).toBeNull();
  });
});
