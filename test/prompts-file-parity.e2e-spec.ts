import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chunkRequest, parsePromptsFile } from '@app/prompts-file';
import type { BatchTier } from '@app/sdk';
import { chunkKey, chunkPlan, planSubmission, SubmitOptions } from '../apps/cli/src/submit';
import { planBatches } from '../apps/web/src/pages/prompts-file';

/*
 * The web app's new-batch page and `kiln submit` share libs/prompts-file: the same file with the
 * same options (the CLI's flags, the page's pickers) must make the same batches, in the same
 * order, with the same prompts and settings, and the same places for their idempotency keys.
 * It lives here, not in either app (an app never imports another) nor in the lib (a lib never
 * imports an app): it needs both. No server: it compares the two apps' plans in memory.
 */
describe('the same prompts file through kiln submit and the new-batch page', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-shared-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const files: Array<[string, string]> = [
    ['plain.txt', '# a comment\na fox\r\n\n  a hare  \n#another\na kite\n'],
    ['strings.jsonl', '"a fox"\n\n{"prompt":"a hare","mine":true}\n'],
    [
      'settings.jsonl',
      [
        '{"prompt":"a fox","model":"gamma-5-pro","resolution":"2K"}',
        '"a kite"',
        '{"prompt":"a hare","tier":"economy"}',
        '{"prompt":"an owl","resolution":"2K","model":"gamma-5-pro"}',
        '{"prompt":"a lark","tier":"standard"}',
        '{"prompt":"a crow","countPerCombo":2,"seed":5,"note":"birds"}',
        '{"prompt":"a wren","aspectRatio":"16:9","countPerCombo":3,"seed":2147483646}',
        '{"prompt":"a tern","aspectRatio":"16:9","countPerCombo":3,"seed":2147483646}',
      ].join('\n'),
    ],
    ['many.txt', Array.from({ length: 23 }, (_, i) => `prompt ${i + 1}`).join('\n')],
  ];
  const options: Array<{ flags: SubmitOptions; tier: BatchTier; note: string }> = [
    { flags: { model: 'eta-image', ratio: '1:1', resolution: '1K', count: 1 }, tier: 'standard', note: '' },
    { flags: { model: 'eta-image', ratio: '4:3', resolution: '2K', count: 2, tier: 'economy', note: 'all' }, tier: 'economy', note: 'all' },
  ];
  const limits = [
    { maxImagesPerBatch: 50, maxPrompts: 1000 },
    { maxImagesPerBatch: 5, maxPrompts: 1000 },
    { maxImagesPerBatch: 50, maxPrompts: 4 },
  ];

  it.each(files)('%s: identical batches for every option set and plan limit', (name, text) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    let compared = 0;
    for (const { flags, tier, note } of options) {
      const cli = planSubmission(file, flags);
      const pickers = {
        model: flags.model!,
        aspectRatio: flags.ratio!,
        resolution: flags.resolution!,
        countPerCombo: flags.count!,
        note,
        tier,
        refMode: 'none' as const,
        refImages: [],
        quality: 'auto',
      };
      for (const limit of limits) {
        const cliBatches = chunkPlan(cli, limit.maxImagesPerBatch, limit.maxPrompts).map((c) => ({
          // The CLI sends standard as no tier and no note as none; the page names both.
          body: { tier: 'standard', note: null, ...chunkRequest(cli.groups, c) },
          key: chunkKey(cli.fingerprint, c),
          images: c.images,
        }));
        const page = planBatches(parsePromptsFile(name, fs.readFileSync(file, 'utf8')), pickers, limit);
        const pageBatches = page.batches.map((b) => {
          const { refMode, refImages, quality, ...body } = b.body;
          expect({ refMode, refImages, quality }).toEqual({ refMode: 'none', refImages: [], quality: 'auto' });
          return { body, key: `kiln-cli-${cli.fingerprint}-${b.place}`, images: b.images };
        });
        expect(pageBatches).toEqual(cliBatches);
        compared += cliBatches.length;
      }
    }
    expect(compared).toBeGreaterThan(options.length * limits.length - 1);
  });

  it('the split and the per-line settings show in the table (the comparison above is not of empty lists)', () => {
    const file = path.join(dir, 'settings.jsonl');
    fs.writeFileSync(file, files[2][1]);
    const plan = chunkPlan(planSubmission(file, options[0].flags), 5, 1000);
    // gamma 2K (2 prompts), eta standard (2), eta economy (1), crow x2 (1), wren/tern x3: one a batch.
    expect(plan.map((c) => [c.group, c.count, c.images])).toEqual([
      [0, 2, 2],
      [1, 2, 2],
      [2, 1, 1],
      [3, 1, 2],
      [4, 1, 3],
      [4, 1, 3],
    ]);
  });
});
