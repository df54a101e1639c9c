import { createHash, randomBytes } from 'node:crypto';

export const KEY_PREFIX = 'kiln_live_';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 32;
export const KEY_PATTERN = /^kiln_live_[0-9A-Za-z]{32}$/;

/** 32 uniform base62 characters (~190 bits); rejection sampling avoids modulo bias. */
export function generateKeySecret(): string {
  let out = '';
  while (out.length < SECRET_LENGTH) {
    for (const byte of randomBytes(48)) {
      if (byte < 248 && out.length < SECRET_LENGTH) out += ALPHABET[byte % 62];
    }
  }
  return KEY_PREFIX + out;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** What the dashboard shows instead of the secret: kiln_live_abcd...wxyz. */
export function keyHint(secret: string): string {
  const body = secret.slice(KEY_PREFIX.length);
  return `${KEY_PREFIX}${body.slice(0, 4)}...${body.slice(-4)}`;
}
