import { parsePromptsFile, promptsByTier } from './prompts-file';

describe('parsePromptsFile (prompts dropped on the new-batch page)', () => {
  it('.txt: one prompt per non-empty line, trimmed, CRLF or LF', () => {
    expect(parsePromptsFile('p.txt', ' a fox \r\n\r\na lighthouse\n')).toEqual([{ prompt: 'a fox' }, { prompt: 'a lighthouse' }]);
  });

  it('.jsonl: a JSON string or an object with a "prompt" string per line', () => {
    expect(parsePromptsFile('p.JSONL', '"a fox"\n{"prompt":"a lighthouse","seed":3}\n\n')).toEqual([{ prompt: 'a fox' }, { prompt: 'a lighthouse' }]);
  });

  it('.jsonl: names the first line that is not JSON or has no prompt, counting blank lines as the file does', () => {
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n{oops')).toThrow('p.jsonl, line 2: not JSON');
    expect(() => parsePromptsFile('p.jsonl', '{"text":"x"}')).toThrow('p.jsonl, line 1: expected a string or an object with "prompt"');
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n\n\nnull')).toThrow('p.jsonl, line 4: expected a string or an object with "prompt"');
  });

  it('.jsonl: a line\'s "tier" ("standard" or "economy") goes with its prompt; a line without one leaves it to the picker', () => {
    const text = '{"prompt":"a fox","tier":"economy"}\n"a kite"\n{"prompt":"a hare","tier":"standard"}\n{"prompt":"a lighthouse"}\n';
    expect(parsePromptsFile('p.jsonl', text)).toEqual([
      { prompt: 'a fox', tier: 'economy' },
      { prompt: 'a kite' },
      { prompt: 'a hare', tier: 'standard' },
      { prompt: 'a lighthouse' },
    ]);
    // A file without tiers gives prompts without one: the picker's tier for all of them.
    expect(parsePromptsFile('p.jsonl', '"a fox"\n{"prompt":"a hare"}').every((p) => !('tier' in p))).toBe(true);
  });

  it('.jsonl: any other "tier" is an error naming the line, as in the CLI', () => {
    for (const tier of ['"Economy"', '"cheap"', '""', 'null', '1', 'true', '["economy"]']) {
      expect(() => parsePromptsFile('p.jsonl', `"ok"\n{"prompt":"a fox","tier":${tier}}`)).toThrow('p.jsonl, line 2: "tier" must be "standard" or "economy"');
    }
  });

  it('.txt: a line is a prompt whatever it says, never a tier', () => {
    expect(parsePromptsFile('p.txt', '{"prompt":"a fox","tier":"economy"}')).toEqual([{ prompt: '{"prompt":"a fox","tier":"economy"}' }]);
  });
});

describe('promptsByTier (a batch per tier for a file whose lines chose tiers)', () => {
  const file = parsePromptsFile('p.jsonl', '{"prompt":"a fox","tier":"economy"}\n"a kite"\n{"prompt":"a hare","tier":"standard"}\n{"prompt":"an owl","tier":"economy"}\n');

  it('mixed: the line\'s tier, else the picker\'s, in the order each tier first appears', () => {
    expect(promptsByTier(file, 'standard')).toEqual([
      { tier: 'economy', prompts: ['a fox', 'an owl'] },
      { tier: 'standard', prompts: ['a kite', 'a hare'] },
    ]);
    // "standard" on a line wins over the picker's economy, as over the CLI's --tier economy.
    expect(promptsByTier(file, 'economy')).toEqual([
      { tier: 'economy', prompts: ['a fox', 'a kite', 'an owl'] },
      { tier: 'standard', prompts: ['a hare'] },
    ]);
  });

  it('one tier: a single group, whatever the picker says when every line chose', () => {
    const economy = parsePromptsFile('p.jsonl', '{"prompt":"a fox","tier":"economy"}\n{"prompt":"a hare","tier":"economy"}');
    expect(promptsByTier(economy, 'standard')).toEqual([{ tier: 'economy', prompts: ['a fox', 'a hare'] }]);
    expect(promptsByTier(parsePromptsFile('p.txt', 'a fox\na hare'), 'economy')).toEqual([{ tier: 'economy', prompts: ['a fox', 'a hare'] }]);
  });

  it('trims prompts and drops blank ones, as typed prompts are', () => {
    expect(promptsByTier([{ prompt: '  a fox ', tier: 'economy' }, { prompt: '   ', tier: 'standard' }], 'standard')).toEqual([{ tier: 'economy', prompts: ['a fox'] }]);
  });
});
