import * as fs from 'node:fs';
import * as path from 'node:path';
import { describePriceRule, expandRoute, pixelSize, PROVIDER_TYPES, type ProviderPreset, type RenderResolution } from '@app/providers';

/**
 * docs/providers.md's preset tables, written from the presets themselves (each type's
 * `presets` in libs/providers/src/<type>/<type>.type.ts): per preset, the pairs it offers,
 * what its upstream makes for Kiln's size of each (by the type's own size rule, the one the
 * catalog's honest-sizes check and the request mapping use), and its price rule. The docs
 * keep them between the two markers below; `npm run docs:presets` writes them again, and preset-tables.spec.ts fails while
 * the docs differ from the presets.
 */

export const PRESET_TABLES_DOC = 'docs/providers.md';
export const PRESET_TABLES_START =
  '<!-- preset-tables:start (generated from the presets by libs/testing/src/preset-tables.ts: do not edit) -->';
export const PRESET_TABLES_END = '<!-- preset-tables:end -->';

/** The usual ratio order (the catalog's), then any other ratio by name. */
const RATIO_ORDER = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
const byRatioOrder = (a: string, b: string) => {
  const rank = (r: string) => (RATIO_ORDER.includes(r) ? RATIO_ORDER.indexOf(r) : RATIO_ORDER.length);
  return rank(a) - rank(b) || a.localeCompare(b);
};

/** What the preset's route makes for Kiln's size of a pair: "1360x768 -> 1344x768", or the size alone when exact. */
function madeFor(preset: ProviderPreset, ratio: string, resolution: RenderResolution): string {
  const def = PROVIDER_TYPES.find((t) => t.type === preset.type)!;
  const asked = pixelSize(ratio, resolution);
  const route = expandRoute({ preset: preset.id });
  const sizeFor = def.sizeFor as ((r: unknown, a: unknown) => { width: number; height: number } | null) | undefined;
  const made = sizeFor?.(route, { ...asked, aspectRatio: ratio, resolution }) ?? asked;
  const askedText = `${asked.width}x${asked.height}`;
  const madeText = `${made.width}x${made.height}`;
  return madeText === askedText ? `${resolution} ${askedText}` : `${resolution} ${askedText} -> ${madeText}`;
}

/** One preset: a line saying what it is and costs, then its pairs. */
export function presetTable(preset: ProviderPreset): string {
  const pairs = Object.entries(preset.model.resolutionsByRatio).sort(([a], [b]) => byRatioOrder(a, b));
  const count = pairs.reduce((n, [, resolutions]) => n + resolutions.length, 0);
  const facts = [
    preset.notes ? `${preset.notes.replace(/\.$/, '')}.` : undefined,
    `Price: ${preset.cost ? describePriceRule(preset.cost, preset.type) : 'no list price'}.`,
    preset.retiresAt ? `Retires ${preset.retiresAt}.` : undefined,
  ].filter(Boolean);
  return [
    `**\`${preset.id}\`** (${count} pairs). ${facts.join(' ')}`,
    '',
    "| Ratio | Resolutions | Kiln's size -> what the upstream makes |",
    '|---|---|---|',
    ...pairs.map(
      ([ratio, resolutions]) =>
        `| ${ratio} | ${resolutions.join(', ')} | ${resolutions.map((r) => madeFor(preset, ratio, r)).join('; ')} |`,
    ),
  ].join('\n');
}

/** Every preset of every type, in the registry's order: the text between the markers. */
export function presetTables(): string {
  return PROVIDER_TYPES.flatMap((t) => t.presets.map((p) => presetTable(p))).join('\n\n');
}

/** The document with the text between its markers replaced by `tables`; throws when a marker is missing. */
export function withPresetTables(doc: string, tables: string): string {
  const start = doc.indexOf(PRESET_TABLES_START);
  const end = doc.indexOf(PRESET_TABLES_END);
  if (start === -1 || end < start) throw new Error(`${PRESET_TABLES_DOC} lacks the preset-tables markers`);
  return `${doc.slice(0, start + PRESET_TABLES_START.length)}\n\n${tables}\n\n${doc.slice(end)}`;
}

/** Writes the tables into docs/providers.md of the repository this file is in. */
if (require.main === module) {
  const file = path.join(path.resolve(__dirname, '../../..'), PRESET_TABLES_DOC);
  fs.writeFileSync(file, withPresetTables(fs.readFileSync(file, 'utf8'), presetTables()));
  console.log(`wrote the preset tables of ${PRESET_TABLES_DOC}`);
}
