import * as path from 'node:path';
import { UsageError } from './cli.errors';

/** What a `.jsonl` line may set for its own prompt, over the command's options. */
export interface LineOptions {
  model?: string;
  aspectRatio?: string;
  resolution?: '1K' | '2K' | '4K';
  countPerCombo?: number;
  seed?: number;
  note?: string;
  /** Over --tier for this prompt: "standard" on a line of an `--tier economy` run makes it standard. */
  tier?: 'standard' | 'economy';
}

export interface PromptLine {
  prompt: string;
  options: LineOptions;
}

const SEED_MAX = 2 ** 31 - 1;

/** Each key a line may carry, with the check its value must pass and what the check expects. */
const LINE_OPTIONS: Record<keyof LineOptions, [(v: unknown) => boolean, string]> = {
  model: [(v) => typeof v === 'string' && v.length > 0, 'a model key'],
  aspectRatio: [(v) => typeof v === 'string' && v.length > 0, 'a ratio such as "16:9"'],
  resolution: [(v) => v === '1K' || v === '2K' || v === '4K', '"1K", "2K" or "4K"'],
  countPerCombo: [(v) => Number.isInteger(v) && (v as number) >= 1, 'a whole number of at least 1'],
  seed: [(v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= SEED_MAX, `a whole number 0..${SEED_MAX}`],
  note: [(v) => typeof v === 'string', 'a string'],
  tier: [(v) => v === 'standard' || v === 'economy', '"standard" or "economy"'],
};

/**
 * A prompts file: `.txt` holds a prompt a line (blank lines and lines starting with `#` are
 * skipped); `.jsonl` a JSON string or `{ "prompt": ..., "model"?, "aspectRatio"?, "resolution"?,
 * "countPerCombo"?, "seed"?, "note"?, "tier"? }` a line (blank lines skipped; other keys are the
 * caller's own and ignored). Anything else is a usage error naming the line.
 */
export function parsePromptsFile(fileName: string, text: string): PromptLine[] {
  const ext = path.extname(fileName).toLowerCase();
  if (ext !== '.txt' && ext !== '.jsonl') throw new UsageError(`${fileName}: a prompts file is .txt (a prompt a line) or .jsonl (a JSON string or {"prompt": ...} a line)`);
  const lines: PromptLine[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || (ext === '.txt' && line.startsWith('#'))) return;
    if (ext === '.txt') {
      lines.push({ prompt: line, options: {} });
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new UsageError(`${fileName}:${i + 1}: not JSON`);
    }
    if (typeof value === 'string' && value.trim()) {
      lines.push({ prompt: value, options: {} });
      return;
    }
    const record = value as Record<string, unknown> | null;
    if (typeof record?.prompt !== 'string' || !record.prompt.trim()) throw new UsageError(`${fileName}:${i + 1}: expected a JSON string or {"prompt": "..."}`);
    const options: Record<string, unknown> = {};
    for (const [key, [valid, expected]] of Object.entries(LINE_OPTIONS)) {
      if (record[key] === undefined) continue;
      if (!valid(record[key])) throw new UsageError(`${fileName}:${i + 1}: "${key}" must be ${expected}`);
      options[key] = record[key];
    }
    lines.push({ prompt: record.prompt, options });
  });
  if (lines.length === 0) throw new UsageError(`${fileName}: no prompts`);
  return lines;
}
