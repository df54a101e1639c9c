import { archiveImageName, promptSlug } from './batch-archive';

describe('archive image names', () => {
  it('the documented example', () => {
    expect(archiveImageName(1, 'A Red Fox!', 'png')).toBe('images/0001-a-red-fox.png');
  });

  it('runs of other characters become one dash, none at either end', () => {
    expect(promptSlug('  --Hello,   World!!--  ')).toBe('hello-world');
    expect(promptSlug('café au lait')).toBe('caf-au-lait');
    expect(promptSlug('snake_case and CamelCase 42')).toBe('snake-case-and-camelcase-42');
  });

  it('at most 40 characters, with no dash left at the cut', () => {
    const slug = promptSlug('a'.repeat(39) + ' bcd');
    expect(slug).toBe('a'.repeat(39));
    expect(promptSlug('word '.repeat(30))).toHaveLength(39);
    expect(promptSlug('x'.repeat(100))).toBe('x'.repeat(40));
  });

  it('an empty slug is "image"', () => {
    expect(promptSlug('日本の桜')).toBe('image');
    expect(promptSlug('!!!')).toBe('image');
    expect(archiveImageName(7, '???', 'png')).toBe('images/0007-image.png');
  });

  it('indexes are zero-padded to four digits and grow past them', () => {
    expect(archiveImageName(42, 'x', 'jpg')).toBe('images/0042-x.jpg');
    expect(archiveImageName(12345, 'x', 'png')).toBe('images/12345-x.png');
  });
});
