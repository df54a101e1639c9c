import * as fs from 'node:fs';
import * as path from 'node:path';
import { allPresets, type ProviderPreset } from '@app/providers';
import { PRESET_TABLES_DOC, PRESET_TABLES_END, PRESET_TABLES_START, presetTable, presetTables, withPresetTables } from './preset-tables';

describe("docs/providers.md's preset tables", () => {
  it('are the presets as they are (else run `npm run docs:presets` and commit docs/providers.md)', () => {
    const doc = fs.readFileSync(path.resolve(__dirname, '../../..', PRESET_TABLES_DOC), 'utf8');
    expect(doc).toBe(withPresetTables(doc, presetTables()));
    for (const preset of allPresets()) expect(doc).toContain(`**\`${preset.id}\`**`);
  });

  it("show each pair, Kiln's size and what the upstream makes for it, and the price with its date", () => {
    const schnell = allPresets().find((p) => p.id === 'replicate/black-forest-labs/flux-schnell')!;
    const table = presetTable(schnell);
    expect(table).toContain('| 16:9 | 1K | 1K 1360x768 -> 1344x768 |');
    expect(table).toContain(
      'Price: USD 0.003 per image (replicate, read 2026-11-28, https://replicate.com/black-forest-labs/flux-schnell).',
    );
    expect(table).not.toContain('| 4:3 |');
    expect(presetTable(allPresets().find((p) => p.id === 'builtin/placeholder')!)).toContain(
      '| 4:5 | 1K, 2K, 4K | 1K 912x1152; 2K 1824x2288; 4K 3664x4576 |',
    );
  });

  it('change when a preset does', () => {
    const preset: ProviderPreset = { ...allPresets().find((p) => p.id === 'bfl/flux-pro-1.1')! };
    const before = presetTable(preset);
    const after = presetTable({ ...preset, model: { ...preset.model, resolutionsByRatio: { '1:1': ['1K'] } } });
    expect(after).not.toBe(before);
    const repriced = presetTable({ ...preset, cost: { ...preset.cost!, rule: { per: 'image', usd: 0.05 }, readOn: '2026-12-01' } });
    expect(repriced).toContain('Price: USD 0.05 per image (bfl, read 2026-12-01,');
  });

  it('are written only between the markers', () => {
    const doc = ['# Providers', 'before', PRESET_TABLES_START, 'old', PRESET_TABLES_END, 'after'].join('\n');
    expect(withPresetTables(doc, 'new')).toBe(
      ['# Providers', 'before', PRESET_TABLES_START, '', 'new', '', PRESET_TABLES_END, 'after'].join('\n'),
    );
    expect(() => withPresetTables('no markers', 'new')).toThrow(/markers/);
  });
});
