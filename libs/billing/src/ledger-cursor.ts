import { invalidRequest } from '@app/errors';

/**
 * Keyset position in the ledger. Unlike the shared cursor (a JS Date, milliseconds), the
 * ledger's created_at has microseconds, so the position keeps PostgreSQL's own text of it:
 * rounding it to milliseconds would skip rows written in the same millisecond.
 */
export interface LedgerCursor {
  /** UTC timestamp with microseconds: 2025-01-31T12:00:00.123456Z */
  createdAt: string;
  /** ledger_entries.id, a bigint as decimal text. */
  id: string;
}

const AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export function encodeLedgerCursor(c: LedgerCursor): string {
  return Buffer.from(JSON.stringify([c.createdAt, c.id])).toString('base64url');
}

export function decodeLedgerCursor(raw: string | undefined): LedgerCursor | null {
  if (raw === undefined || raw === '') return null;
  try {
    const [at, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown[];
    if (typeof at !== 'string' || !AT.test(at) || Number.isNaN(Date.parse(at))) throw new Error();
    if (typeof id !== 'string' || !/^\d{1,19}$/.test(id)) throw new Error();
    return { createdAt: at, id };
  } catch {
    throw invalidRequest('cursor', 'malformed', 'The cursor is not one this service returned');
  }
}
