import { InvalidStorageKeyError } from './storage.errors';
import { assertValidKey, isValidKey, keyFromUrlUnder, newObjectKey, sanitizeFileName } from './storage.keys';

describe('sanitizeFileName', () => {
  it.each([
    ['photo.png', 'photo.png'],
    ['/etc/passwd', 'passwd'],
    ['C:\\Users\\me\\My Picture (1).JPG', 'My-Picture-1-.JPG'],
    ['../../secret.txt', 'secret.txt'],
    ['..', 'file'],
    ['.htaccess', 'htaccess'],
    ['a..b...png', 'a.b.png'],
    ['café.png', 'cafe.png'],
    ['bad\u0000name\n.png', 'badname.png'],
    ['日本語.png', '-.png'],
    ['', 'file'],
    ['dir/', 'file'],
  ])('%j -> %j', (input, expected) => {
    expect(sanitizeFileName(input)).toBe(expected);
  });

  it('caps the length at 100 and keeps a short extension', () => {
    const long = sanitizeFileName(`${'a'.repeat(300)}.webp`);
    expect(long).toHaveLength(100);
    expect(long.endsWith('.webp')).toBe(true);
    expect(sanitizeFileName('b'.repeat(300))).toBe('b'.repeat(100));
  });

  it('always yields a valid key segment', () => {
    for (const name of ['..', '...', '.', '/', '\\\\', '.-.', ' ', '\u0007', 'x'.repeat(500)]) {
      expect(isValidKey(`uploads/abc/${sanitizeFileName(name)}`)).toBe(true);
    }
  });
});

describe('newObjectKey', () => {
  it('is <prefix>/<32 hex>/<sanitised name> and differs every time', () => {
    const a = newObjectKey('uploads', '../My Photo.png');
    const b = newObjectKey('uploads', '../My Photo.png');
    expect(a).toMatch(/^uploads\/[0-9a-f]{32}\/My-Photo\.png$/);
    expect(a).not.toBe(b);
    expect(newObjectKey('results', 'x.png')).toMatch(/^results\/[0-9a-f]{32}\/x\.png$/);
    expect(newObjectKey('previews', '')).toMatch(/^previews\/[0-9a-f]{32}\/file$/);
    expect(isValidKey(a)).toBe(true);
  });
});

describe('isValidKey', () => {
  it.each(['uploads/0123abcd/photo.png', 'a', 'a/b-c_d.e/f'])('accepts %j', (key) => {
    expect(isValidKey(key)).toBe(true);
  });

  it.each([
    '',
    '/etc/passwd',
    '../x',
    'uploads/../../x',
    'uploads/a..b/x',
    'uploads//x',
    'uploads/x/',
    './x',
    'uploads/.hidden',
    'uploads\\x',
    'uploads/x y',
    'uploads/%2e%2e/x',
    'uploads/x?y',
    'C:/x',
    'a'.repeat(513),
  ])('refuses %j', (key) => {
    expect(isValidKey(key)).toBe(false);
    expect(() => assertValidKey(key)).toThrow(InvalidStorageKeyError);
  });
});

describe('keyFromUrlUnder', () => {
  const base = 'http://localhost:8080/files';

  it('returns the key for URLs under the base', () => {
    expect(keyFromUrlUnder(base, 'http://localhost:8080/files/uploads/ab/x.png')).toBe('uploads/ab/x.png');
    expect(keyFromUrlUnder(`${base}/`, 'http://LOCALHOST:8080/files/uploads/ab/x.png?x=1#y')).toBe('uploads/ab/x.png');
    expect(keyFromUrlUnder('http://localhost:80/files', 'http://localhost/files/a/b')).toBe('a/b');
  });

  it('returns null for anything else', () => {
    for (const url of [
      'http://localhost:8081/files/uploads/ab/x.png',
      'https://localhost:8080/files/uploads/ab/x.png',
      'http://evil.example/files/uploads/ab/x.png',
      'http://localhost:8080/filesx/uploads/ab/x.png',
      'http://localhost:8080/files/',
      'http://localhost:8080/files',
      'http://localhost:8080/files/uploads/%41',
      'http://localhost:8080/files/uploads/a%20b',
      'not a url',
      '',
    ]) {
      expect(keyFromUrlUnder(base, url)).toBeNull();
    }
  });

  it('resolves dot segments like an HTTP client would, so they cannot escape the base', () => {
    expect(keyFromUrlUnder(base, 'http://localhost:8080/files/../etc/passwd')).toBeNull();
    expect(keyFromUrlUnder(base, 'http://localhost:8080/files/uploads/../results/a')).toBe('results/a');
    expect(keyFromUrlUnder(base, 'http://localhost:8080/files/%2e%2e/%2E%2E/etc/passwd')).toBeNull();
  });
});
