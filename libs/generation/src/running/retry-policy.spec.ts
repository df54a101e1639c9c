import { MAX_RETRY_AFTER_MS, retryDelayMs } from './retry-policy';

describe('retryDelayMs', () => {
  const fixed = (r: number) => ({ baseMs: 1000, random: () => r });

  it('doubles per attempt with jitter between half and the whole step', () => {
    expect(retryDelayMs(1, fixed(0))).toBe(500);
    expect(retryDelayMs(1, fixed(1))).toBe(1000);
    expect(retryDelayMs(2, fixed(0))).toBe(1000);
    expect(retryDelayMs(3, fixed(1))).toBe(4000);
  });

  it('is capped', () => {
    expect(retryDelayMs(30, { baseMs: 1000, maxMs: 8000, random: () => 1 })).toBe(8000);
  });

  it('never retries sooner than Retry-After, within reason', () => {
    expect(retryDelayMs(1, fixed(0), 7000)).toBe(7000);
    expect(retryDelayMs(1, fixed(1), 10)).toBe(1000);
    expect(retryDelayMs(1, fixed(0), 24 * 3600_000)).toBe(MAX_RETRY_AFTER_MS);
  });
});
