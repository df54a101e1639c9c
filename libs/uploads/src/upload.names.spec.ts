import { isValidKey } from '@app/storage';
import { uploadDisplayName, uploadObjectName } from './upload.names';

describe('uploadDisplayName', () => {
  it.each([
    ['cat.png', 'cat.png'],
    ['  Été 日本.png ', 'Été 日本.png'],
    ['bad\u0000na\nme\u007f.png', 'badname.png'],
    ['evil\u202egnp.exe', 'evilgnp.exe'],
    ['', 'file'],
    ['\u0001\u0002', 'file'],
    [undefined, 'file'],
  ])('%j -> %j', (input, expected) => {
    expect(uploadDisplayName(input)).toBe(expected);
  });

  it('caps the length at 255 code points without splitting a surrogate pair', () => {
    const name = uploadDisplayName('😀'.repeat(300));
    expect(Array.from(name)).toHaveLength(255);
    expect(name).toBe('😀'.repeat(255));
  });
});

describe('uploadObjectName', () => {
  it.each([
    ['photo.png', 'jpg', 'photo.jpg'],
    ['photo', 'png', 'photo.png'],
    ['.png', 'png', 'file.png'],
    ['../../etc/passwd', 'gif', 'passwd.gif'],
    ['My Picture (1).JPG', 'jpg', 'My-Picture-1-.jpg'],
    ['archive.tar.gz', 'webp', 'archive.tar.webp'],
    ['name..', 'png', 'name.png'],
    ['日本.png', 'png', '-.png'],
  ])('%j as %s -> %j', (name, ext, expected) => {
    expect(uploadObjectName(name, ext)).toBe(expected);
  });

  it('keeps the extension when the name is long, and always yields a valid key segment', () => {
    const long = uploadObjectName(`${'a'.repeat(500)}.png`, 'webp');
    expect(long.endsWith('.webp')).toBe(true);
    expect(long.length).toBeLessThanOrEqual(100);
    for (const name of ['..', '...', '.', '/', ' ', '\u0007', 'x'.repeat(500), 'a.b.c..']) {
      expect(isValidKey(`uploads/abc/${uploadObjectName(name, 'png')}`)).toBe(true);
    }
  });
});
