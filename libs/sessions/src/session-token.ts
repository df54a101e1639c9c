import { createHash, randomBytes } from 'node:crypto';

export const SESSION_PREFIX = 'kiln_sess_';
/** 32 random bytes as base64url (43 characters, no padding). */
export const SESSION_PATTERN = /^kiln_sess_[A-Za-z0-9_-]{43}$/;
export const SESSION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * A dashboard session token. Its own prefix keeps it apart from API keys (kiln_live_):
 * neither pattern matches the other, so one is never accepted where the other is expected.
 */
export function generateSessionToken(): string {
  return SESSION_PREFIX + randomBytes(32).toString('base64url');
}

/** The only form of a token the database ever holds. */
export function sessionTokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
