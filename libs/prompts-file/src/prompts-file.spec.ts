import * as fs from 'node:fs';
import * as path from 'node:path';
import { chunkPrompts, chunkRequest, groupPromptLines, parsePromptsFile, PromptsFileError } from '.';

/*
 * The reading of a prompts file that `kiln submit` and the web app's new-batch page share. What
 * each app makes of it is checked beside each (apps/cli/src/submit.spec.ts,
 * apps/web/src/pages/prompts-file.spec.ts), and the two against each other in
 * test/prompts-file-parity.e2e-spec.ts.
 */
describe('the lib', () => {
  it('imports nothing but its own files: the web bundles it for the browser, the CLI package compiles it in', () => {
    const dir = __dirname;
    const sources = fs.readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'));
    expect(sources).toEqual(expect.arrayContaining(['index.ts', 'prompts-file.ts']));
    for (const name of sources) {
      const imports = [
        ...fs.readFileSync(path.join(dir, name), 'utf8').matchAll(/\b(?:from|import|require)\s*\(?\s*['"]([^'"]+)['"]/g),
      ].map((m) => m[1]);
      expect({ name, imports: imports.filter((i) => !i.startsWith('./')) }).toEqual({ name, imports: [] });
    }
  });
});

describe('parsePromptsFile', () => {
  const prompts = (lines: { prompt: string }[]) => lines.map((l) => l.prompt);

  it('.txt: a prompt a line, blank lines and # comments skipped, whitespace trimmed', () => {
    expect(prompts(parsePromptsFile('p.txt', '# header\n\n a fox \r\n#skip\na hare\n'))).toEqual(['a fox', 'a hare']);
  });

  it('.jsonl: a JSON string or {"prompt"} a line', () => {
    expect(prompts(parsePromptsFile('p.jsonl', '"a fox"\n\n{"prompt": "a hare", "id": 7}\n'))).toEqual(['a fox', 'a hare']);
  });

  it('.jsonl lines carry their own model, aspectRatio, resolution, countPerCombo, seed and note; bad values are named', () => {
    const line =
      '{"prompt": "a fox", "model": "m2", "aspectRatio": "16:9", "resolution": "2K", "countPerCombo": 3, "seed": 42, "note": "n", "id": 7}';
    expect(parsePromptsFile('p.jsonl', line)).toEqual([
      { prompt: 'a fox', options: { model: 'm2', aspectRatio: '16:9', resolution: '2K', countPerCombo: 3, seed: 42, note: 'n' } },
    ]);
    expect(() => parsePromptsFile('p.jsonl', '{"prompt": "a", "seed": -1}')).toThrow(
      'p.jsonl:1: "seed" must be a whole number 0..2147483647',
    );
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n{"prompt": "a", "resolution": "8K"}')).toThrow('p.jsonl:2: "resolution"');
    expect(() => parsePromptsFile('p.jsonl', '{"prompt": "a", "countPerCombo": 1.5}')).toThrow('"countPerCombo"');
  });

  it('.jsonl lines carry their own tier, "standard" or "economy"; anything else is named with its line', () => {
    expect(parsePromptsFile('p.jsonl', '{"prompt": "a", "tier": "economy"}\n{"prompt": "b", "tier": "standard"}')).toEqual([
      { prompt: 'a', options: { tier: 'economy' } },
      { prompt: 'b', options: { tier: 'standard' } },
    ]);
    for (const bad of ['"cheap"', '"Economy"', '""', 'null', '1', '["economy"]']) {
      expect(() => parsePromptsFile('p.jsonl', `"ok"\n{"prompt": "a", "tier": ${bad}}`)).toThrow(
        new PromptsFileError('p.jsonl:2: "tier" must be "standard" or "economy"'),
      );
    }
  });

  it('refuses other file types, bad lines (named) and empty files with a PromptsFileError', () => {
    expect(() => parsePromptsFile('p.csv', 'a')).toThrow(PromptsFileError);
    expect(() => parsePromptsFile('p.jsonl', 'not json')).toThrow(PromptsFileError);
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n{"prompt": 3}\n')).toThrow('p.jsonl:2');
    expect(() => parsePromptsFile('p.jsonl', 'not json')).toThrow('p.jsonl:1: not JSON');
    expect(() => parsePromptsFile('p.txt', '# only a comment\n')).toThrow('no prompts');
  });
});

describe('grouping and splitting', () => {
  it('fills batches up to the plan limit, counting copies per prompt', () => {
    expect(chunkPrompts(25, 1, 10, 1000)).toEqual([
      { first: 0, count: 10 },
      { first: 10, count: 10 },
      { first: 20, count: 5 },
    ]);
    expect(chunkPrompts(7, 3, 10, 1000)).toEqual([
      { first: 0, count: 3 },
      { first: 3, count: 3 },
      { first: 6, count: 1 },
    ]);
    expect(chunkPrompts(5, 1, 100, 2)).toEqual([
      { first: 0, count: 2 },
      { first: 2, count: 2 },
      { first: 4, count: 1 },
    ]);
    // A prompt alone above the limit still goes, alone: the server then says why not.
    expect(chunkPrompts(2, 20, 10, 1000)).toEqual([
      { first: 0, count: 1 },
      { first: 1, count: 1 },
    ]);
  });

  it('a prompt with no model (none in the base, none on its line) is a PromptsFileError naming it', () => {
    const lines = parsePromptsFile('p.jsonl', '{"prompt": "a", "model": "m"}\n"b"');
    expect(() => groupPromptLines('p.jsonl', lines, {})).toThrow(
      new PromptsFileError('p.jsonl: prompt 2 has no model: pass --model or give the line a "model"'),
    );
    expect(() => groupPromptLines('p.jsonl', lines, {})).toThrow(PromptsFileError);
    expect(groupPromptLines('p.jsonl', lines, { model: 'n' }).map((g) => [g.body.model, g.prompts])).toEqual([
      ['m', ['a']],
      ['n', ['b']],
    ]);
  });

  it("a seed runs on across a group's batches, image by image, and wraps at 2^31", () => {
    const groups = groupPromptLines('p.txt', parsePromptsFile('p.txt', 'a\nb\nc'), { model: 'm', countPerCombo: 2, seed: 2 ** 31 - 3 });
    const bodies = chunkPrompts(3, 2, 2, 1000).map((c) => chunkRequest(groups, c));
    expect(bodies.map((b) => [b.prompts, b.seed])).toEqual([
      [['a'], 2 ** 31 - 3],
      [['b'], 2 ** 31 - 1],
      [['c'], 1],
    ]);
  });
});
