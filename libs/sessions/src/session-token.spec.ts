import { KEY_PATTERN, generateKeySecret } from '@app/keys';
import { generateSessionToken, SESSION_PATTERN, sessionTokenHash } from './session-token';

describe('session tokens', () => {
  it('carry the kiln_sess_ prefix and 256 random bits', () => {
    for (let i = 0; i < 100; i++) expect(generateSessionToken()).toMatch(SESSION_PATTERN);
    expect(new Set(Array.from({ length: 1000 }, generateSessionToken)).size).toBe(1000);
  });

  it('are never mistaken for API keys, nor API keys for them', () => {
    expect(generateSessionToken()).not.toMatch(KEY_PATTERN);
    expect(generateKeySecret()).not.toMatch(SESSION_PATTERN);
  });

  it('are stored as hex SHA-256', () => {
    expect(sessionTokenHash('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
