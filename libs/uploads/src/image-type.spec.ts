import sharp from 'sharp';
import { detectImageType } from './image-type';

describe('detectImageType', () => {
  const make = (format: 'png' | 'jpeg' | 'webp' | 'gif') =>
    sharp({ create: { width: 3, height: 2, channels: 3, background: '#123456' } })
      [format]()
      .toBuffer();

  it.each([
    ['png', 'image/png', 'png'],
    ['jpeg', 'image/jpeg', 'jpg'],
    ['webp', 'image/webp', 'webp'],
    ['gif', 'image/gif', 'gif'],
  ] as const)('recognises real %s bytes', async (format, contentType, extension) => {
    expect(detectImageType(await make(format))).toMatchObject({ contentType, extension });
  });

  it('recognises GIF87a as well as GIF89a', () => {
    expect(detectImageType(Buffer.from('GIF87a\x01\x00\x01\x00', 'latin1'))?.contentType).toBe('image/gif');
  });

  it.each([
    ['empty', Buffer.alloc(0)],
    ['text', Buffer.from('hello, this is text')],
    ['a truncated PNG signature', Buffer.from([0x89, 0x50, 0x4e, 0x47])],
    ['RIFF that is not WebP (WAV)', Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1')],
    ['BMP', Buffer.from('BM\x00\x00\x00\x00\x00\x00', 'latin1')],
    ['TIFF', Buffer.from([0x49, 0x49, 0x2a, 0x00, 0, 0, 0, 0])],
    ['SVG', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')],
    ['GIF90a', Buffer.from('GIF90a\x01\x00', 'latin1')],
  ])('refuses %s', (_label, body) => {
    expect(detectImageType(body)).toBeNull();
  });
});
