import { KilnError } from '@app/errors';
import { decodeLedgerCursor, encodeLedgerCursor } from './ledger-cursor';

describe('ledger cursor', () => {
  it('round-trips a position with microseconds', () => {
    const c = { createdAt: '2025-01-31T12:00:00.123456Z', id: '42' };
    expect(decodeLedgerCursor(encodeLedgerCursor(c))).toEqual(c);
  });

  it('absent means the first page', () => {
    expect(decodeLedgerCursor(undefined)).toBeNull();
    expect(decodeLedgerCursor('')).toBeNull();
  });

  it.each([
    'garbage',
    Buffer.from('[1,2]').toString('base64url'),
    Buffer.from('["2025-01-31T12:00:00.123Z","1"]').toString('base64url'),
    Buffer.from('["2025-01-31T12:00:00.123456Z","1; drop"]').toString('base64url'),
  ])('refuses %s as invalid_request', (raw) => {
    expect(() => decodeLedgerCursor(raw)).toThrow(KilnError);
  });
});
