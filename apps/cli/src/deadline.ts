import { InvalidArgumentError } from 'commander';

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `--deadline`: a duration from now (`90s`, `10m`, `2h`, `1d`) or an ISO 8601 time
 * (`2026-12-01T18:00:00Z`), as Unix milliseconds. The service checks the rest (in the future,
 * at most 7 days ahead) and refuses with invalid_request on `deadline`.
 */
export function parseDeadline(value: string, now: number = Date.now()): number {
  const duration = /^(\d+)(s|m|h|d)$/.exec(value.trim());
  if (duration) return now + Number(duration[1]) * UNIT_MS[duration[2]];
  // A bare number or a date without a time would be read in surprising ways: a time is required.
  const at = /^\d{4}-\d{2}-\d{2}T/.test(value.trim()) ? Date.parse(value) : NaN;
  if (Number.isNaN(at)) throw new InvalidArgumentError('expected a duration (90s, 10m, 2h, 1d) or an ISO time (2026-12-01T18:00:00Z)');
  return at;
}
