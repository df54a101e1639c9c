import { generateKeySecret, KEY_PATTERN, keyHint, sha256Hex } from './key-secret';

describe('key secrets', () => {
  it('have the kiln_live_ prefix and 32 base62 characters', () => {
    for (let i = 0; i < 200; i++) expect(generateKeySecret()).toMatch(KEY_PATTERN);
  });

  it('are unique', () => {
    const seen = new Set(Array.from({ length: 1000 }, () => generateKeySecret()));
    expect(seen.size).toBe(1000);
  });

  it('use every base62 character (no modulo gaps)', () => {
    const chars = new Set(Array.from({ length: 400 }, () => generateKeySecret().slice(10)).join(''));
    expect(chars.size).toBe(62);
  });

  it('hint shows only the first and last four characters of the secret part', () => {
    const secret = 'kiln_live_abcdEFGH0123456789ijklmnopqrstWXYZ';
    expect(keyHint(secret)).toBe('kiln_live_abcd...WXYZ');
  });

  it('hash is hex SHA-256', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
