export type Tier = 'standard' | 'economy';

export interface FilePrompt {
  prompt: string;
  /** The .jsonl line's own "tier", over the page's tier picker for this prompt; undefined: the picker's. */
  tier?: Tier;
}

/**
 * Prompts from a dropped or chosen file: .txt is one prompt per non-empty line; .jsonl is one
 * JSON value per line, a string or an object with a "prompt" string and, as in the CLI
 * (docs/cli.md), an optional "tier" ("standard" or "economy"; any other value is an error).
 * Other keys are ignored. Returns the prompts, or throws an Error naming the first bad line
 * (counted as in the file, blank lines included).
 */
export function parsePromptsFile(name: string, text: string): FilePrompt[] {
  const lines = text.split(/\r?\n/).map((l, i) => ({ line: l.trim(), n: i + 1 })).filter((l) => l.line.length > 0);
  if (!/\.jsonl$/i.test(name)) return lines.map((l) => ({ prompt: l.line }));
  return lines.map(({ line, n }) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`${name}, line ${n}: not JSON`);
    }
    if (typeof value === 'string') return { prompt: value };
    const record = value as { prompt?: unknown; tier?: unknown } | null;
    if (!record || typeof record !== 'object' || typeof record.prompt !== 'string') throw new Error(`${name}, line ${n}: expected a string or an object with "prompt"`);
    if (record.tier === undefined) return { prompt: record.prompt };
    if (record.tier !== 'standard' && record.tier !== 'economy') throw new Error(`${name}, line ${n}: "tier" must be "standard" or "economy"`);
    return { prompt: record.prompt, tier: record.tier };
  });
}

/**
 * A file's prompts by the tier each ends up on (its line's, else the picker's): a batch per
 * tier, in the order each tier first appears, as the CLI groups a file. Prompts are trimmed and
 * blank ones dropped, as typed ones are.
 */
export function promptsByTier(prompts: FilePrompt[], pickerTier: Tier): Array<{ tier: Tier; prompts: string[] }> {
  const groups = new Map<Tier, string[]>();
  for (const p of prompts) {
    const prompt = p.prompt.trim();
    if (!prompt) continue;
    const tier = p.tier ?? pickerTier;
    groups.set(tier, [...(groups.get(tier) ?? []), prompt]);
  }
  return [...groups].map(([tier, list]) => ({ tier, prompts: list }));
}
