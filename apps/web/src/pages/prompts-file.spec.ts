import { parsePromptsFile, Pickers, planBatches, PromptsFileError, typedLines } from './prompts-file';

const pickers: Pickers = {
  model: 'eta-image',
  aspectRatio: '1:1',
  resolution: '1K',
  countPerCombo: 1,
  note: '',
  tier: 'standard',
  refMode: 'none',
  refImages: [],
  quality: 'auto',
};
const roomy = { maxImagesPerBatch: 50, maxPrompts: 1000 };

describe("parsePromptsFile on the new-batch page (the CLI's parser, libs/prompts-file)", () => {
  it('.txt: one prompt per line, trimmed, CRLF or LF; blank lines and # comments skipped', () => {
    expect(parsePromptsFile('p.txt', ' a fox \r\n\r\n# a comment\n  #indented comment\na lighthouse # not a comment\n')).toEqual([
      { prompt: 'a fox', options: {} },
      { prompt: 'a lighthouse # not a comment', options: {} },
    ]);
  });

  it('.jsonl: a JSON string or an object with a "prompt"; the per-line keys go with the prompt, unknown keys are ignored', () => {
    const text =
      '"a fox"\n{"prompt":"a hare","model":"gamma-5-pro","aspectRatio":"16:9","resolution":"2K","countPerCombo":3,"seed":7,"note":"n","tier":"economy","mine":1}\n\n';
    expect(parsePromptsFile('p.JSONL', text)).toEqual([
      { prompt: 'a fox', options: {} },
      {
        prompt: 'a hare',
        options: { model: 'gamma-5-pro', aspectRatio: '16:9', resolution: '2K', countPerCombo: 3, seed: 7, note: 'n', tier: 'economy' },
      },
    ]);
    // In a .txt the same line is only text, and # starts a comment only there.
    expect(parsePromptsFile('p.txt', '{"prompt":"a fox","tier":"economy"}')).toEqual([
      { prompt: '{"prompt":"a fox","tier":"economy"}', options: {} },
    ]);
    expect(parsePromptsFile('p.jsonl', '"#1 a fox"')).toEqual([{ prompt: '#1 a fox', options: {} }]);
  });

  it('refuses a bad value naming the file, the line (blank lines counted) and what the key must be', () => {
    const bad: Array<[string, string]> = [
      ['{"prompt":"x","model":""}', '"model" must be a model key'],
      ['{"prompt":"x","aspectRatio":7}', '"aspectRatio" must be a ratio such as "16:9"'],
      ['{"prompt":"x","resolution":"8K"}', '"resolution" must be "1K", "2K" or "4K"'],
      ['{"prompt":"x","countPerCombo":0}', '"countPerCombo" must be a whole number of at least 1'],
      ['{"prompt":"x","countPerCombo":1.5}', '"countPerCombo" must be a whole number of at least 1'],
      ['{"prompt":"x","seed":-1}', '"seed" must be a whole number 0..2147483647'],
      ['{"prompt":"x","seed":2147483648}', '"seed" must be a whole number 0..2147483647'],
      ['{"prompt":"x","note":3}', '"note" must be a string'],
      ['{"prompt":"x","tier":"Economy"}', '"tier" must be "standard" or "economy"'],
      ['{"prompt":"x","tier":null}', '"tier" must be "standard" or "economy"'],
      ['{oops', 'not JSON'],
      ['{"text":"x"}', 'expected a JSON string or {"prompt": "..."}'],
      ['{"prompt":"  "}', 'expected a JSON string or {"prompt": "..."}'],
      ['""', 'expected a JSON string or {"prompt": "..."}'],
      ['null', 'expected a JSON string or {"prompt": "..."}'],
    ];
    for (const [line, message] of bad) expect(() => parsePromptsFile('p.jsonl', `"ok"\n\n${line}`)).toThrow(`p.jsonl:3: ${message}`);
  });

  it('refuses other file types and files without prompts', () => {
    expect(() => parsePromptsFile('p.csv', 'a')).toThrow(PromptsFileError);
    expect(() => parsePromptsFile('p.csv', 'a')).toThrow(
      'p.csv: a prompts file is .txt (a prompt a line) or .jsonl (a JSON string or {"prompt": ...} a line)',
    );
    expect(() => parsePromptsFile('.txt', 'a')).toThrow('a prompts file is');
    expect(() => parsePromptsFile('p.txt', '# only a comment\n\n')).toThrow('p.txt: no prompts');
  });
});

describe('planBatches (what the page creates for its prompts)', () => {
  it("typed prompts: one batch with the pickers' settings, the body POST /batches takes", () => {
    const plan = planBatches(typedLines(' a fox \n\n a hare'), { ...pickers, note: 'Foxes' }, roomy);
    expect(plan.batches).toEqual([
      {
        group: 0,
        first: 0,
        count: 2,
        images: 2,
        place: '0-2',
        body: {
          model: 'eta-image',
          aspectRatio: '1:1',
          resolution: '1K',
          countPerCombo: 1,
          note: 'Foxes',
          tier: 'standard',
          refMode: 'none',
          refImages: [],
          quality: 'auto',
          prompts: ['a fox', 'a hare'],
        },
      },
    ]);
  });

  it("a line's settings win over the pickers'; a batch per distinct set and tier, in the order each first appears", () => {
    const lines = parsePromptsFile(
      'p.jsonl',
      [
        '{"prompt":"a fox","model":"gamma-5-pro","resolution":"2K"}',
        '"a kite"',
        '{"prompt":"a hare","tier":"economy"}',
        '{"prompt":"an owl","resolution":"2K","model":"gamma-5-pro"}',
        '{"prompt":"a lark","tier":"standard"}',
        '{"prompt":"a crow","countPerCombo":2,"seed":5,"note":"birds"}',
      ].join('\n'),
    );
    const plan = planBatches(lines, pickers, roomy);
    expect(plan.batches.map((b) => ({ ...b.body, refMode: undefined, refImages: undefined, quality: undefined }))).toEqual([
      expect.objectContaining({
        model: 'gamma-5-pro',
        resolution: '2K',
        aspectRatio: '1:1',
        countPerCombo: 1,
        tier: 'standard',
        note: null,
        prompts: ['a fox', 'an owl'],
      }),
      // "standard" on a line is the picker's standard: the same batch as lines saying nothing.
      expect.objectContaining({ model: 'eta-image', resolution: '1K', tier: 'standard', prompts: ['a kite', 'a lark'] }),
      expect.objectContaining({ model: 'eta-image', tier: 'economy', prompts: ['a hare'] }),
      expect.objectContaining({ model: 'eta-image', countPerCombo: 2, seed: 5, note: 'birds', prompts: ['a crow'] }),
    ]);
    expect(plan.groups.map((g) => g.prompts.length)).toEqual([2, 2, 1, 1]);
    // With the picker on economy, the line saying "standard" leaves the others' batch.
    const economy = planBatches(lines, { ...pickers, tier: 'economy' }, roomy);
    expect(economy.batches.map((b) => [b.body.tier, b.body.prompts])).toEqual([
      ['economy', ['a fox', 'an owl']],
      ['economy', ['a kite', 'a hare']],
      ['standard', ['a lark']],
      ['economy', ['a crow']],
    ]);
  });

  it("splits each group by the plan's images per batch, counting copies and references each; a seed runs on across the split", () => {
    const lines = parsePromptsFile(
      'p.jsonl',
      [
        '"p1"',
        '"p2"',
        '"p3"',
        '"p4"',
        '"p5"',
        '{"prompt":"q1","seed":100}',
        '{"prompt":"q2","seed":100}',
        '{"prompt":"q3","seed":100}',
      ].join('\n'),
    );
    const plan = planBatches(lines, { ...pickers, countPerCombo: 2 }, { maxImagesPerBatch: 4, maxPrompts: 1000 });
    expect(plan.batches.map((b) => [b.group, b.body.prompts, b.images, b.body.seed, b.place])).toEqual([
      [0, ['p1', 'p2'], 4, undefined, '0-2'],
      [0, ['p3', 'p4'], 4, undefined, '2-2'],
      [0, ['p5'], 2, undefined, '4-1'],
      [1, ['q1', 'q2'], 4, 100, 'g1-0-2'],
      [1, ['q3'], 2, 104, 'g1-2-1'], // image 5 of the group: seed 100 + 4
    ]);
    // Three references, each with every prompt: 3 images a prompt, one prompt a batch of 4.
    const refs = { ...pickers, refMode: 'each' as const, refImages: ['r1', 'r2', 'r3'] };
    const each = planBatches(typedLines('a\nb'), refs, { maxImagesPerBatch: 4, maxPrompts: 1000 });
    expect(each.batches.map((b) => [b.body.prompts, b.images, b.body.refMode, b.body.refImages])).toEqual([
      [['a'], 3, 'each', ['r1', 'r2', 'r3']],
      [['b'], 3, 'each', ['r1', 'r2', 'r3']],
    ]);
    // Combined: one image a prompt whatever the references.
    expect(
      planBatches(typedLines('a\nb'), { ...refs, refMode: 'combined' }, { maxImagesPerBatch: 4, maxPrompts: 1000 }).batches,
    ).toHaveLength(1);
    // The catalog's prompts per batch splits too, and a prompt bigger than a batch still gets one (the server says why not).
    expect(planBatches(typedLines('a\nb\nc'), pickers, { maxImagesPerBatch: 50, maxPrompts: 2 }).batches.map((b) => b.count)).toEqual([
      2, 1,
    ]);
    expect(
      planBatches(typedLines('a'), { ...pickers, countPerCombo: 9 }, { maxImagesPerBatch: 4, maxPrompts: 1000 }).batches.map(
        (b) => b.images,
      ),
    ).toEqual([9]);
  });

  it('references are sent only with a mode', () => {
    const body = planBatches(typedLines('a'), { ...pickers, refMode: 'none', refImages: ['r1'] }, roomy).batches[0].body;
    expect([body.refMode, body.refImages]).toEqual(['none', []]);
  });
});
