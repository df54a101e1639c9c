import { parsePromptsFile } from './prompts-file';

describe('parsePromptsFile (prompts dropped on the new-batch page)', () => {
  it('.txt: one prompt per non-empty line, trimmed, CRLF or LF', () => {
    expect(parsePromptsFile('p.txt', ' a fox \r\n\r\na lighthouse\n')).toEqual(['a fox', 'a lighthouse']);
  });

  it('.jsonl: a JSON string or an object with a "prompt" string per line', () => {
    expect(parsePromptsFile('p.JSONL', '"a fox"\n{"prompt":"a lighthouse","seed":3}\n\n')).toEqual(['a fox', 'a lighthouse']);
  });

  it('.jsonl: names the first line that is not JSON or has no prompt', () => {
    expect(() => parsePromptsFile('p.jsonl', '"ok"\n{oops')).toThrow('p.jsonl, line 2: not JSON');
    expect(() => parsePromptsFile('p.jsonl', '{"text":"x"}')).toThrow('p.jsonl, line 1: expected a string or an object with "prompt"');
  });
});
