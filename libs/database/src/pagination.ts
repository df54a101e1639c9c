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
    const [at, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown[];
    if (typeof at !== 'string' || typeof id !== 'string') throw new Error();
    const createdAt = new Date(at);
    if (Number.isNaN(createdAt.getTime())) throw new Error();
    if (!isUuid(id) && !/^\d{1,19}$/.test(id)) throw new Error();
    return { createdAt, id };
  } catch {
    throw invalidRequest(field, 'malformed', 'The cursor is not one this service returned');
  }
}

/**
 * A query-string value as text, for a parser's pattern to judge: Express gives a string, an
 * array of them (a repeated parameter) or an object (`a[b]=`); the text of an object,
 * `[object Object]`, matches no parser's pattern, so String() is right for any of them.
 */
export function queryText(raw: unknown): string {
  return String(raw);
}

/** Parses `limit`: an integer 1..max, default `fallback`. */
export function parseLimit(raw: unknown, fallback = 20, max = 100): number {
  if (raw === undefined || raw === '') return fallback;
  const s = queryText(raw);
  if (!/^\d+$/.test(s)) throw invalidRequest('limit', 'not_an_integer', `limit must be an integer from 1 to ${max}`);
  const n = Number(s);
  if (n < 1 || n > max) throw invalidRequest('limit', 'out_of_range', `limit must be an integer from 1 to ${max}`);
  return n;
}
