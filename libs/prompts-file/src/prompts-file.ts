/*
 * Prompts files, read the same way by the CLI (`kiln submit`) and the web app's new-batch page,
 * both of which import this lib: parsing, the checks on a line's own options, the grouping of
 * lines into batches and the split of each group by the plan's batch limit. It imports nothing
 * (no Node built-ins, no packages, no other lib): the page's browser bundle holds it, and the
 * CLI's package build compiles it into the @kiln/cli package (apps/cli/build.js).
 */

/**
 * A prompts file that cannot be read, or a prompt that cannot make a batch: the message names
 * the file and the line (or prompt). The CLI prints it as a usage error (exit 2); the page
 * shows it under the file picker.
 */
export class PromptsFileError extends Error {
  override readonly name = 'PromptsFileError';
}

/**
 * What a `.jsonl` line may set for its own prompt, over the command's options (the page's pickers).
 * The resolution and tier unions repeat the wire's (the SDK's BatchResolution and BatchTier) on
 * purpose: this lib imports nothing, so that the CLI's package and the web app compile it in alone.
 */
export interface LineOptions {
  model?: string;
  aspectRatio?: string;
  /** @app/geometry's Resolution, spelled out: this lib imports no other (see above). */
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

/** The file name's extension, lower-cased, as Node's path.extname gives it (a leading dot alone is no extension). */
function extensionOf(fileName: string): string {
  const base = fileName.slice(Math.max(fileName.lastIndexOf('/'), fileName.lastIndexOf('\\')) + 1);
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot).toLowerCase() : '';
}

/**
 * A prompts file: `.txt` holds a prompt a line (blank lines and lines starting with `#` are
 * skipped); `.jsonl` a JSON string or `{ "prompt": ..., "model"?, "aspectRatio"?, "resolution"?,
 * "countPerCombo"?, "seed"?, "note"?, "tier"? }` a line (blank lines skipped; other keys are the
 * caller's own and ignored). Anything else is a PromptsFileError naming the line.
 */
export function parsePromptsFile(fileName: string, text: string): PromptLine[] {
  const ext = extensionOf(fileName);
  if (ext !== '.txt' && ext !== '.jsonl')
    throw new PromptsFileError(`${fileName}: a prompts file is .txt (a prompt a line) or .jsonl (a JSON string or {"prompt": ...} a line)`);
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
      throw new PromptsFileError(`${fileName}:${i + 1}: not JSON`);
    }
    if (typeof value === 'string' && value.trim()) {
      lines.push({ prompt: value, options: {} });
      return;
    }
    const record = value as Record<string, unknown> | null;
    if (typeof record?.prompt !== 'string' || !record.prompt.trim())
      throw new PromptsFileError(`${fileName}:${i + 1}: expected a JSON string or {"prompt": "..."}`);
    const options: Record<string, unknown> = {};
    for (const [key, [valid, expected]] of Object.entries(LINE_OPTIONS)) {
      if (record[key] === undefined) continue;
      if (!valid(record[key])) throw new PromptsFileError(`${fileName}:${i + 1}: "${key}" must be ${expected}`);
      options[key] = record[key];
    }
    lines.push({ prompt: record.prompt, options });
  });
  if (lines.length === 0) throw new PromptsFileError(`${fileName}: no prompts`);
  return lines;
}

/** Whether any line of a file sets an option of its own (then its prompts are more than text). */
export function linesCarryOptions(lines: PromptLine[]): boolean {
  return lines.some((l) => Object.keys(l.options).length > 0);
}

/** The options every line starts from: the command's (the page's pickers), any other body fields included. */
export type BaseOptions = Omit<LineOptions, 'tier'> & { tier?: 'economy' };

/** What a group's batches are created with, before its prompts: the base's fields with the lines' over them. */
export type GroupBody<B extends BaseOptions = BaseOptions> = Omit<B, 'tier'> & Omit<LineOptions, 'tier' | keyof B> & { tier?: 'economy' };

/** Prompts that share one set of options (the base's, with a `.jsonl` line's over them): they go in the same batches. */
export interface PromptGroup<B extends BaseOptions = BaseOptions> {
  prompts: string[];
  body: GroupBody<B>;
  imagesPerPrompt: number;
}

/**
 * The lines grouped by the batch body each needs, in the order each option set first appears:
 * a line's options over the base's. A line's "tier": "standard" is sent as no tier (standard is
 * the server's default), so it groups, and keys its batches, with lines saying nothing.
 * `refFanOut`: the images a prompt makes per copy (the reference count with refMode "each", else 1).
 * A prompt with no model is a PromptsFileError naming it.
 */
export function groupPromptLines<B extends BaseOptions>(fileName: string, lines: PromptLine[], base: B, refFanOut = 1): PromptGroup<B>[] {
  const groups = new Map<string, PromptGroup<B>>();
  lines.forEach((line, i) => {
    const body = { ...base, ...line.options } as Record<string, unknown>;
    if (body.tier === 'standard') delete body.tier;
    if (!body.model) throw new PromptsFileError(`${fileName}: prompt ${i + 1} has no model: pass --model or give the line a "model"`);
    const key = JSON.stringify(Object.entries(body).sort(([a], [b]) => a.localeCompare(b)));
    let group = groups.get(key);
    if (!group) {
      const imagesPerPrompt = ((body.countPerCombo as number | undefined) ?? 1) * refFanOut;
      group = { prompts: [], body: body as GroupBody<B>, imagesPerPrompt };
      groups.set(key, group);
    }
    group.prompts.push(line.prompt);
  });
  return [...groups.values()];
}

/** Prompts per batch: as many as the plan's batch limit allows, at least one (the server then says why not). */
export function chunkPrompts(
  promptCount: number,
  imagesPerPrompt: number,
  maxImagesPerBatch: number,
  maxPrompts: number,
): { first: number; count: number }[] {
  const per = Math.max(1, Math.min(maxPrompts, Math.floor(maxImagesPerBatch / imagesPerPrompt)));
  const chunks: { first: number; count: number }[] = [];
  for (let first = 0; first < promptCount; first += per) chunks.push({ first, count: Math.min(per, promptCount - first) });
  return chunks;
}

/** One batch of a submission: `count` prompts of group `group` from its prompt `first`. */
export interface Chunk {
  group: number;
  first: number;
  count: number;
  images: number;
}

/** Every group's prompts split by the plan's batch limit, each chunk knowing its group. */
export function chunkGroups(groups: PromptGroup<BaseOptions>[], maxImagesPerBatch: number, maxPrompts: number): Chunk[] {
  return groups.flatMap((g, group) =>
    chunkPrompts(g.prompts.length, g.imagesPerPrompt, maxImagesPerBatch, maxPrompts).map((c) => ({
      group,
      ...c,
      images: c.count * g.imagesPerPrompt,
    })),
  );
}

/**
 * The body of one chunk's batch, before references: its group's options and its prompts. A
 * seed runs on across the group's batches, as if it were one batch: image n of the group
 * renders with seed + n - 1 however the plan splits it.
 */
export function chunkRequest<B extends BaseOptions>(
  groups: PromptGroup<B>[],
  chunk: { group?: number; first: number; count: number },
): GroupBody<B> & { prompts: string[] } {
  const group = groups[chunk.group ?? 0];
  const seed = typeof group.body.seed === 'number' ? { seed: (group.body.seed + chunk.first * group.imagesPerPrompt) % 2 ** 31 } : {};
  return { ...group.body, ...seed, prompts: group.prompts.slice(chunk.first, chunk.first + chunk.count) };
}

/** A chunk's place in its submission, for its idempotency key: the same file and options give the same one. */
export function chunkPlace(chunk: { group?: number; first: number; count: number }): string {
  const group = chunk.group ? `g${chunk.group}-` : '';
  return `${group}${chunk.first}-${chunk.count}`;
}
