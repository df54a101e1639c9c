import { SEEDED_BLOCKED_TERMS } from '@app/database';
import { ContentPolicy } from './content-policy';

describe('ContentPolicy', () => {
  const policy = new ContentPolicy(SEEDED_BLOCKED_TERMS);

  it('matches whole words, case-insensitively, across odd spacing and punctuation', () => {
    expect(policy.isBlocked('CSAM')).toBe(true);
    expect(policy.isBlocked('some csam, please')).toBe(true);
    expect(policy.isBlocked('naked   children')).toBe(true);
    expect(policy.isBlocked('naked-children')).toBe(true);
    expect(policy.isBlocked('ＣＳＡＭ')).toBe(true); // full-width letters fold under NFKC
  });

  it('does not match inside other words or innocent prompts', () => {
    expect(policy.isBlocked('scampi')).toBe(false);
    expect(policy.isBlocked('a child flying a kite')).toBe(false);
    expect(policy.isBlocked('a naked mole rat')).toBe(false);
  });

  it('reports the first blocked prompt, and is configurable', () => {
    expect(policy.firstBlocked(['a cat', 'a dog', 'csam'])).toBe(2);
    expect(policy.firstBlocked(['a cat'])).toBe(-1);
    const custom = new ContentPolicy(['forbidden thing']);
    expect(custom.isBlocked('a Forbidden Thing here')).toBe(true);
    expect(custom.isBlocked('csam')).toBe(false);
    expect(new ContentPolicy([]).isBlocked('anything')).toBe(false);
  });
});
