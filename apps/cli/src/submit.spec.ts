import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UsageError } from './cli.errors';
import { parsePromptsFile } from './prompts-file';
import { chunkKey, chunkPlan, chunkPrompts, groupIsEconomy, planSubmission } from './submit';
import { SubmitStateStore } from './submit-state';

describe('prompts files', () => {
  const prompts = (lines: { prompt: string }[]) => lines.map((l) => l.prompt);

  it('.txt: a prompt a line, blank lines and # comments skipped, whitespace trimmed', () => {
    expect(prompts(parsePromptsFile('p.txt', '# header\n\n a fox \r\n#skip\na hare\n'))).toEqual(['a fox', 'a hare']);
  });

  it('.jsonl: a JSON string or {"prompt"} a line', () => {
    expect(prompts(parsePromptsFile('p.jsonl', '"a fox"\n\n{"prompt": "a hare", "id": 7}\n'))).toEqual(['a fox', 'a hare']);
  });

  it('.jsonl lines carry their own model, aspectRatio, resolution, countPerCombo, seed and note; bad values are named', () => {
    const line = '{"prompt": "a fox", "model": "m2", "aspectRatio": "16:9", "resolution": "2K", "countPerCombo": 3, "seed": 42, "note": "n", "id": 7}';
    expect(parsePromptsFile('p.jsonl', line)).toEqual([
      { prompt: 'a fox', options: { model: 'm2', aspectRatio: '16:9', resolution: '2K', countPerCombo: 3, seed: 42, note: 'n' } },
    ]);
    expect(() => parsePromptsFile('p.jsonl', '{"prompt": "a", "seed": -1}')).toThrow('p.jsonl:1: "seed" must be a whole number 0..2147483647');
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n{"prompt": "a", "resolution": "8K"}')).toThrow('p.jsonl:2: "resolution"');
    expect(() => parsePromptsFile('p.jsonl', '{"prompt": "a", "countPerCombo": 1.5}')).toThrow('"countPerCombo"');
  });

  it('.jsonl lines carry their own tier, "standard" or "economy"; anything else is named with its line', () => {
    expect(parsePromptsFile('p.jsonl', '{"prompt": "a", "tier": "economy"}\n{"prompt": "b", "tier": "standard"}')).toEqual([
      { prompt: 'a', options: { tier: 'economy' } },
      { prompt: 'b', options: { tier: 'standard' } },
    ]);
    for (const bad of ['"cheap"', '"Economy"', '""', 'null', '1', '["economy"]']) {
      expect(() => parsePromptsFile('p.jsonl', `"ok"\n{"prompt": "a", "tier": ${bad}}`)).toThrow(new UsageError('p.jsonl:2: "tier" must be "standard" or "economy"'));
    }
  });

  it('refuses other file types, bad lines (named) and empty files as usage errors', () => {
    expect(() => parsePromptsFile('p.csv', 'a')).toThrow(UsageError);
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n{"prompt": 3}\n')).toThrow('p.jsonl:2');
    expect(() => parsePromptsFile('p.jsonl', 'not json')).toThrow('p.jsonl:1: not JSON');
    expect(() => parsePromptsFile('p.txt', '# only a comment\n')).toThrow('no prompts');
  });
});

describe('splitting a submission', () => {
  it('fills batches up to the plan limit, counting copies per prompt', () => {
    expect(chunkPrompts(25, 1, 10, 1000)).toEqual([{ first: 0, count: 10 }, { first: 10, count: 10 }, { first: 20, count: 5 }]);
    expect(chunkPrompts(7, 3, 10, 1000)).toEqual([{ first: 0, count: 3 }, { first: 3, count: 3 }, { first: 6, count: 1 }]);
    expect(chunkPrompts(5, 1, 100, 2)).toEqual([{ first: 0, count: 2 }, { first: 2, count: 2 }, { first: 4, count: 1 }]);
    // A prompt alone above the limit still goes, alone: the server then says why not.
    expect(chunkPrompts(2, 20, 10, 1000)).toEqual([{ first: 0, count: 1 }, { first: 1, count: 1 }]);
  });

  it('the same file and options give the same fingerprint and keys; any change gives others', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-plan-'));
    try {
      const file = path.join(dir, 'p.txt');
      fs.writeFileSync(file, 'a\nb\nc\n');
      const one = planSubmission(file, { model: 'm' });
      expect(planSubmission(file, { model: 'm' }).fingerprint).toBe(one.fingerprint);
      expect(planSubmission(file, { model: 'm', count: 2 }).fingerprint).not.toBe(one.fingerprint);
      expect(planSubmission(file, { model: 'n' }).fingerprint).not.toBe(one.fingerprint);
      expect(chunkKey(one.fingerprint, { first: 0, count: 2 })).not.toBe(chunkKey(one.fingerprint, { first: 2, count: 1 }));
      expect(chunkKey(one.fingerprint, { first: 0, count: 2 }).length).toBeLessThanOrEqual(255);
      fs.writeFileSync(file, 'a\nb\nd\n');
      expect(planSubmission(file, { model: 'm' }).fingerprint).not.toBe(one.fingerprint);
      expect(planSubmission(file, { model: 'm', count: 3 }).groups[0].imagesPerPrompt).toBe(3);
      expect(() => planSubmission(file, { model: 'm', refMode: 'each' })).toThrow('--ref-mode needs');
      expect(() => planSubmission(path.join(dir, 'missing.txt'), { model: 'm' })).toThrow(/Cannot read .*ENOENT/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a .jsonl file with options per line', () => {
  it("groups prompts by their option set (the command's options under each line's own), in order of first appearance", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-plan-'));
    try {
      const file = path.join(dir, 'p.jsonl');
      const lines = ['"a"', '{"prompt": "b", "seed": 7}', '{"prompt": "c", "countPerCombo": 2, "model": "m2"}', '{"prompt": "d"}', '{"prompt": "e", "seed": 7}'];
      fs.writeFileSync(file, lines.join('\n'));
      const plan = planSubmission(file, { model: 'm', note: 'all' });
      expect(plan.promptCount).toBe(5);
      expect(plan.groups).toEqual([
        { prompts: ['a', 'd'], body: { model: 'm', note: 'all' }, imagesPerPrompt: 1 },
        { prompts: ['b', 'e'], body: { model: 'm', note: 'all', seed: 7 }, imagesPerPrompt: 1 },
        { prompts: ['c'], body: { model: 'm2', note: 'all', countPerCombo: 2 }, imagesPerPrompt: 2 },
      ]);
      // Each group is split on its own; chunk keys differ across groups.
      const chunks = chunkPlan(plan, 1, 1000);
      expect(chunks.map((c) => [c.group, c.first, c.count, c.images])).toEqual([[0, 0, 1, 1], [0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 1, 1], [2, 0, 1, 2]]);
      expect(new Set(chunks.map((c) => chunkKey(plan.fingerprint, c))).size).toBe(5);
      // Without --model every line must name one.
      expect(() => planSubmission(file, {})).toThrow('prompt 1 has no model');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a .jsonl file with a tier per line', () => {
  const plan = (lines: string[], options: Parameters<typeof planSubmission>[1]) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-plan-'));
    try {
      const file = path.join(dir, 'p.jsonl');
      fs.writeFileSync(file, lines.join('\n'));
      return planSubmission(file, options);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  const lines = ['"a"', '{"prompt": "b", "tier": "economy"}', '{"prompt": "c", "tier": "standard"}', '{"prompt": "d", "tier": "economy"}'];

  it('a line\'s tier wins over --tier for its prompt; standard is sent as no tier, grouped with lines that name none', () => {
    const standardRun = plan(lines, { model: 'm' });
    expect(standardRun.groups.map((g) => [g.prompts, g.body])).toEqual([
      [['a', 'c'], { model: 'm' }],
      [['b', 'd'], { model: 'm', tier: 'economy' }],
    ]);
    expect(standardRun.groups.map((_, g) => groupIsEconomy(standardRun, g))).toEqual([false, true]);
    // Under --tier economy the line saying "standard" is the one standard prompt.
    const economyRun = plan(lines, { model: 'm', tier: 'economy' });
    expect(economyRun.groups.map((g) => [g.prompts, g.body])).toEqual([
      [['a', 'b', 'd'], { model: 'm', tier: 'economy' }],
      [['c'], { model: 'm' }],
    ]);
    expect(economyRun.groups.map((_, g) => groupIsEconomy(economyRun, g))).toEqual([true, false]);
    // --tier standard is the same submission as no --tier, line tiers or not.
    expect(plan(lines, { model: 'm', tier: 'standard' })).toEqual(standardRun);
    expect(economyRun.fingerprint).not.toBe(standardRun.fingerprint);
  });

  it('every line standard under --tier economy leaves nothing on the economy tier', () => {
    const run = plan(['{"prompt": "a", "tier": "standard"}', '{"prompt": "b", "tier": "standard"}'], { model: 'm', tier: 'economy' });
    expect(run.groups).toEqual([{ prompts: ['a', 'b'], body: { model: 'm' }, imagesPerPrompt: 1 }]);
    expect(groupIsEconomy(run)).toBe(false);
  });
});

describe('the state file', () => {
  it('keeps submissions apart, survives a reload, and refuses a file it cannot read', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-state-'));
    try {
      const store = new SubmitStateStore(dir);
      store.put('a', { file: 'p.txt', startedAt: 1, refs: {}, chunks: [] });
      store.put('b', { file: 'q.txt', startedAt: 2, refs: {}, chunks: [] });
      const again = new SubmitStateStore(dir);
      expect(again.get('a')?.file).toBe('p.txt');
      expect(again.get('b')?.file).toBe('q.txt');
      expect(fs.readdirSync(dir)).toEqual(['.kiln-submit.json']);
      fs.writeFileSync(store.file, '{"half": ');
      expect(() => new SubmitStateStore(dir)).toThrow(UsageError);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
