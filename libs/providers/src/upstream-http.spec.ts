import { parseDurationMs, parseRateHeaders } from './upstream-http';

describe("OpenAI's request budget headers", () => {
  it('reads remaining, limit and the reset in its Go duration forms', () => {
    const headers = new Headers({
      'x-ratelimit-remaining-requests': '17',
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-reset-requests': '6m0s',
    });
    expect(parseRateHeaders(headers)).toEqual({ remaining: 17, limit: 60, resetMs: 360_000 });
    expect(parseDurationMs('1s')).toBe(1000);
    expect(parseDurationMs('250ms')).toBe(250);
    expect(parseDurationMs('1h2m3.5s')).toBe(3_723_500);
    expect(parseDurationMs('2')).toBe(2000);
  });

  it('an answer without them, or with values it cannot read, tells nothing', () => {
    expect(parseRateHeaders(new Headers({ 'retry-after': '3' }))).toBeUndefined();
    expect(parseRateHeaders(new Headers({ 'x-ratelimit-remaining-requests': 'many' }))).toBeUndefined();
    expect(parseDurationMs('soon')).toBeUndefined();
    expect(parseDurationMs('')).toBeUndefined();
    // Token budgets are not request budgets.
    expect(parseRateHeaders(new Headers({ 'x-ratelimit-remaining-tokens': '5000' }))).toBeUndefined();
  });
});
