import { invalidRequest } from '@app/errors';
import { isUuid } from './query';

/** Keyset position: (createdAt, id) of the last row of the previous page. */
export interface Cursor {
  createdAt: Date;
  id: string;
}

/** Opaque to clients: base64url of the position, so its shape can change later. */
export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.createdAt.toISOString(), c.id])).toString('base64url');
}

export function decodeCursor(raw: string | undefined, field = 'cursor'): Cursor | null {
  if (raw === undefined || raw === '') return null;
  try {
    const [at, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    const createdAt = new Date(at);
    if (typeof at !== 'string' || typeof id !== 'string' || Number.isNaN(createdAt.getTime())) throw new Error();
    if (!isUuid(id) && !/^\d{1,19}$/.test(id)) throw new Error();
    return { createdAt, id };
  } catch {
    throw invalidRequest(field, 'malformed', 'The cursor is not one this service returned');
  }
}

/** Parses `limit`: an integer 1..max, default `fallback`. */
export function parseLimit(raw: unknown, fallback = 20, max = 100): number {
  if (raw === undefined || raw === '') return fallback;
  const s = String(raw);
  if (!/^\d+$/.test(s)) throw invalidRequest('limit', 'not_an_integer', `limit must be an integer from 1 to ${max}`);
  const n = Number(s);
  if (n < 1 || n > max) throw invalidRequest('limit', 'out_of_range', `limit must be an integer from 1 to ${max}`);
  return n;
}
