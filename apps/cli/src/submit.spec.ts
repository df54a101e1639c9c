import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UsageError } from './cli.errors';
import { chunkKey, chunkPlan, groupIsEconomy, planSubmission, SubmitOptions } from './submit';
import { SubmitStateStore } from './submit-state';

describe('prompts files (read by libs/prompts-file)', () => {
  it("the lib's refusals are usage errors (exit 2) with the lib's messages, naming the file and line", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-plan-'));
    try {
      // A file's name, its text, the options, and what the message says after the file's path.
      const cases: Array<[string, string, SubmitOptions, string]> = [
        ['p.csv', 'a', { model: 'm' }, ': a prompts file is .txt (a prompt a line) or .jsonl (a JSON string or {"prompt": ...} a line)'],
        ['p.jsonl', '"ok"\n{"prompt": "a", "tier": "cheap"}', { model: 'm' }, ':2: "tier" must be "standard" or "economy"'],
        ['q.jsonl', 'not json', { model: 'm' }, ':1: not JSON'],
        ['p.txt', '# only a comment\n', { model: 'm' }, ': no prompts'],
        ['q.txt', 'a fox', {}, ': prompt 1 has no model: pass --model or give the line a "model"'],
      ];
      for (const [name, text, options, after] of cases) {
        const file = path.join(dir, name);
        fs.writeFileSync(file, text);
        expect(() => planSubmission(file, options)).toThrow(new UsageError(`${file}${after}`));
        expect(() => planSubmission(file, options)).toThrow(UsageError);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('splitting a submission', () => {
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
      const lines = [
        '"a"',
        '{"prompt": "b", "seed": 7}',
        '{"prompt": "c", "countPerCombo": 2, "model": "m2"}',
        '{"prompt": "d"}',
        '{"prompt": "e", "seed": 7}',
      ];
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
      expect(chunks.map((c) => [c.group, c.first, c.count, c.images])).toEqual([
        [0, 0, 1, 1],
        [0, 1, 1, 1],
        [1, 0, 1, 1],
        [1, 1, 1, 1],
        [2, 0, 1, 2],
      ]);
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

  it("a line's tier wins over --tier for its prompt; standard is sent as no tier, grouped with lines that name none", () => {
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
