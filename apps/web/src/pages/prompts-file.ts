/**
 * Prompts from a dropped or chosen file: .txt is one prompt per non-empty line; .jsonl is one
 * JSON value per line, a string or an object with a "prompt" string. Returns the prompts, or
 * throws an Error naming the first bad line.
 */
export function parsePromptsFile(name: string, text: string): string[] {
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l.length > 0);
  if (!/\.jsonl$/i.test(name)) return lines;
  return lines.map((line, i) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`${name}, line ${i + 1}: not JSON`);
    }
    if (typeof value === 'string') return value;
    if (value && typeof value === 'object' && typeof (value as { prompt?: unknown }).prompt === 'string') return (value as { prompt: string }).prompt;
    throw new Error(`${name}, line ${i + 1}: expected a string or an object with "prompt"`);
  });
}
