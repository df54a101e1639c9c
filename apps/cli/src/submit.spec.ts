import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UsageError } from './cli.errors';
import { parsePromptsFile } from './prompts-file';
import { chunkKey, chunkPrompts, planSubmission } from './submit';
import { SubmitStateStore } from './submit-state';

describe('prompts files', () => {
  it('.txt: a prompt a line, blank lines and # comments skipped, whitespace trimmed', () => {
    expect(parsePromptsFile('p.txt', '# header\n\n a fox \r\n#skip\na hare\n')).toEqual(['a fox', 'a hare']);
  });

  it('.jsonl: a JSON string or {"prompt"} a line', () => {
    expect(parsePromptsFile('p.jsonl', '"a fox"\n\n{"prompt": "a hare", "id": 7}\n')).toEqual(['a fox', 'a hare']);
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
      expect(planSubmission(file, { model: 'm', count: 3 }).imagesPerPrompt).toBe(3);
      expect(() => planSubmission(file, { model: 'm', refMode: 'each' })).toThrow('--ref-mode needs');
      expect(() => planSubmission(path.join(dir, 'missing.txt'), { model: 'm' })).toThrow(/Cannot read .*ENOENT/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
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
