import * as path from 'node:path';
import { UsageError } from './cli.errors';

/**
 * A prompts file: `.txt` holds a prompt a line (blank lines and lines starting with `#` are
 * skipped); `.jsonl` a JSON string or `{ "prompt": ... }` a line (blank lines skipped).
 * Anything else is a usage error naming the line.
 */
export function parsePromptsFile(fileName: string, text: string): string[] {
  const ext = path.extname(fileName).toLowerCase();
  if (ext !== '.txt' && ext !== '.jsonl') throw new UsageError(`${fileName}: a prompts file is .txt (a prompt a line) or .jsonl (a JSON string or {"prompt": ...} a line)`);
  const prompts: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || (ext === '.txt' && line.startsWith('#'))) return;
    if (ext === '.txt') {
      prompts.push(line);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new UsageError(`${fileName}:${i + 1}: not JSON`);
    }
    const prompt = typeof value === 'string' ? value : (value as { prompt?: unknown } | null)?.prompt;
    if (typeof prompt !== 'string' || !prompt.trim()) throw new UsageError(`${fileName}:${i + 1}: expected a JSON string or {"prompt": "..."}`);
    prompts.push(prompt);
  });
  if (prompts.length === 0) throw new UsageError(`${fileName}: no prompts`);
  return prompts;
}
