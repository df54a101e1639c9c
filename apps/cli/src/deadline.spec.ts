import { InvalidArgumentError } from 'commander';
import { parseDeadline } from './deadline';

describe('parseDeadline (--deadline)', () => {
  const now = Date.UTC(2026, 10, 28, 12, 0, 0);

  it('reads a duration from now', () => {
    expect(parseDeadline('90s', now)).toBe(now + 90_000);
    expect(parseDeadline('10m', now)).toBe(now + 600_000);
    expect(parseDeadline('2h', now)).toBe(now + 7_200_000);
    expect(parseDeadline('1d', now)).toBe(now + 86_400_000);
  });

  it('reads an ISO time, with its offset', () => {
    expect(parseDeadline('2026-11-28T18:00:00Z', now)).toBe(Date.UTC(2026, 10, 28, 18));
    expect(parseDeadline('2026-11-28T18:00:00+01:00', now)).toBe(Date.UTC(2026, 10, 28, 17));
  });

  it.each(['', '10', '10x', 'soon', '2026-11-28', '-5m', '1.5h'])('refuses %p', (value) => {
    expect(() => parseDeadline(value, now)).toThrow(InvalidArgumentError);
  });
});
