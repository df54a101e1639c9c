import { findUncleanText, uncleanReason } from './clean-text';

describe('the clean-text rule', () => {
  it('refuses U+0000 and lone surrogates, accepts any other Unicode', () => {
    expect(uncleanReason('a\u0000b')).toBe('contains_nul');
    expect(uncleanReason('\u0000')).toBe('contains_nul');
    expect(uncleanReason('a\uD800')).toBe('lone_surrogate'); // high, string end
    expect(uncleanReason('\uD800b')).toBe('lone_surrogate'); // high, followed by a non-low
    expect(uncleanReason('\uDC00')).toBe('lone_surrogate'); // low, string start
    expect(uncleanReason('a\uDFFFb')).toBe('lone_surrogate'); // low, after a non-high
    expect(uncleanReason('\uDC00\uD800')).toBe('lone_surrogate'); // a reversed pair is two lone halves
    expect(uncleanReason(JSON.parse('"\\ud83d"'))).toBe('lone_surrogate');
    for (const ok of ['', 'plain', 'ünïcödé', '😀 a pair', '\uD83D\uDE00\uD83D\uDE00', 'tab\tnew\nline', '\u0001', '\uFFFF']) {
      expect(uncleanReason(ok)).toBeNull();
    }
  });

  it('names the first bad string by its path, object keys included', () => {
    expect(findUncleanText({ prompts: ['ok', 'b\u0000'], note: 'x' }, '')).toEqual({ field: 'prompts[1]', reason: 'contains_nul' });
    expect(findUncleanText({ provider: { type: 'openai', model: '\uD800' } }, '')).toEqual({
      field: 'provider.model',
      reason: 'lone_surrogate',
    });
    expect(findUncleanText({ creditCost: { 'a\u0000': 1 } }, '')).toEqual({ field: 'creditCost.a\u0000', reason: 'contains_nul' });
    expect(findUncleanText('x\u0000', 'id')).toEqual({ field: 'id', reason: 'contains_nul' });
    expect(findUncleanText([[['\uDC00']]], 'a')).toEqual({ field: 'a[0][0][0]', reason: 'lone_surrogate' });
  });

  it('passes clean values and non-strings', () => {
    expect(findUncleanText({ a: 1, b: null, c: true, d: [1, 'x', { e: '😀' }] }, '')).toBeNull();
    expect(findUncleanText(undefined, 'body')).toBeNull();
    expect(findUncleanText(42, 'n')).toBeNull();
  });
});
