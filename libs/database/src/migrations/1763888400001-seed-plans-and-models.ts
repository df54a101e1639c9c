import { MigrationInterface, QueryRunner } from 'typeorm';

/** Plans of docs/api.md#limits-and-plans; rate limits are Kiln's own defaults, editable by the operator. */
const PLANS = [
  { key: 'free', apiAccess: false, maxKeys: 0, maxImages: 4, maxConcurrent: 1, rpm: 60 },
  { key: 'starter', apiAccess: true, maxKeys: 2, maxImages: 10, maxConcurrent: 1, rpm: 120 },
  { key: 'studio', apiAccess: true, maxKeys: 5, maxImages: 50, maxConcurrent: 10, rpm: 600 },
  { key: 'scale', apiAccess: true, maxKeys: 10, maxImages: 100, maxConcurrent: 20, rpm: 1200 },
];

// A frozen copy of the resolution tiers (@app/geometry's Resolution): a migration must not change when the code does.
type Res = '1K' | '2K' | '4K';
interface SeedModel {
  key: string;
  name: string;
  blurb: string;
  cost: Partial<Record<Res, number>>;
  maxRefs: number | null;
  quality?: boolean;
  background?: boolean;
}

/** The sixteen models and prices of docs/api.md#model-catalog, in its order. */
const MODELS: SeedModel[] = [
  {
    key: 'alpha-image-2',
    name: 'Alpha Image 2',
    blurb: 'General-purpose model with quality levels and transparent backgrounds.',
    cost: { '1K': 5, '2K': 10, '4K': 20 },
    maxRefs: 4,
    quality: true,
    background: true,
  },
  {
    key: 'alpha-image-2-5',
    name: 'Alpha Image 2.5',
    blurb: 'Newer Alpha model; more reference images, cheaper 4K.',
    cost: { '1K': 5, '2K': 10, '4K': 16 },
    maxRefs: 8,
    quality: true,
    background: true,
  },
  {
    key: 'beta-pro',
    name: 'Beta Pro',
    blurb: 'High-fidelity Beta model for detailed scenes.',
    cost: { '1K': 5, '2K': 6, '4K': 10 },
    maxRefs: 4,
  },
  { key: 'beta-2', name: 'Beta 2', blurb: 'Balanced Beta model for everyday work.', cost: { '1K': 4, '2K': 6, '4K': 10 }, maxRefs: 4 },
  { key: 'beta-2-lite', name: 'Beta 2 Lite', blurb: 'Fast, low-cost Beta model at 1K only.', cost: { '1K': 3 }, maxRefs: 4 },
  {
    key: 'beta-2-1',
    name: 'Beta 2.1',
    blurb: 'Refreshed Beta 2 with better prompt adherence.',
    cost: { '1K': 4, '2K': 6, '4K': 10 },
    maxRefs: 4,
  },
  { key: 'gamma-4-5', name: 'Gamma 4.5', blurb: 'Large-format Gamma model, 2K and 4K only.', cost: { '2K': 6, '4K': 6 }, maxRefs: 4 },
  { key: 'gamma-5-lite', name: 'Gamma 5 Lite', blurb: 'Lighter Gamma 5 for 2K and 4K output.', cost: { '2K': 5, '4K': 5 }, maxRefs: 4 },
  { key: 'gamma-5-pro', name: 'Gamma 5 Pro', blurb: 'Top Gamma 5 model at 1K and 2K.', cost: { '1K': 6, '2K': 12 }, maxRefs: 4 },
  {
    key: 'gamma-5-flash',
    name: 'Gamma 5 Flash',
    blurb: 'Fast Gamma 5 that accepts up to ten references.',
    cost: { '1K': 3, '2K': 3 },
    maxRefs: 10,
  },
  { key: 'delta', name: 'Delta', blurb: 'Single-reference model at 1K.', cost: { '1K': 4 }, maxRefs: 1 },
  { key: 'epsilon-2-pro', name: 'Epsilon 2 Pro', blurb: 'Epsilon model for 1K and 2K work.', cost: { '1K': 5, '2K': 6 }, maxRefs: 8 },
  { key: 'zeta-image-3-pro', name: 'Zeta Image 3 Pro', blurb: 'Premium Zeta model.', cost: { '1K': 6, '2K': 10 }, maxRefs: 3 },
  { key: 'zeta-image-3', name: 'Zeta Image 3', blurb: 'Zeta 3 at one price for 1K and 2K.', cost: { '1K': 4, '2K': 4 }, maxRefs: 3 },
  {
    key: 'zeta-image-2-1',
    name: 'Zeta Image 2.1',
    blurb: 'Earlier Zeta model with up to ten references.',
    cost: { '1K': 4, '2K': 6 },
    maxRefs: 10,
  },
  { key: 'eta-image', name: 'Eta Image', blurb: 'Cheapest model: 1 credit per 1K image.', cost: { '1K': 1 }, maxRefs: null },
];

const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];

/** docs/api.md#model-catalog: every ratio at every priced resolution, except 21:9 at 4K. */
function resolutionsByRatio(cost: Partial<Record<Res, number>>): Record<string, Res[]> {
  const priced = (['1K', '2K', '4K'] as Res[]).filter((r) => cost[r] !== undefined);
  const out: Record<string, Res[]> = {};
  for (const ratio of RATIOS) {
    const legal = priced.filter((r) => !(ratio === '21:9' && r === '4K'));
    if (legal.length > 0) out[ratio] = legal;
  }
  return out;
}

export class SeedPlansAndModels1763888400001 implements MigrationInterface {
  name = 'SeedPlansAndModels1763888400001';

  public async up(q: QueryRunner): Promise<void> {
    for (const p of PLANS) {
      await q.query(
        `INSERT INTO plans (key, api_access, max_keys, max_images_per_batch, max_concurrent_batches, requests_per_minute)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [p.key, p.apiAccess, p.maxKeys, p.maxImages, p.maxConcurrent, p.rpm],
      );
    }
    let order = 0;
    for (const m of MODELS) {
      await q.query(
        `INSERT INTO models (key, display_name, blurb, credit_cost, resolutions_by_ratio, supports_ref_images,
           max_ref_images, supports_quality, supports_background, max_prompt_length, enabled, provider, sort_order)
         VALUES ($1, $2, $3, $4, $5, true, $6, $7, $8, 4000, true, '{"type":"builtin"}', $9)`,
        [
          m.key,
          m.name,
          m.blurb,
          JSON.stringify(m.cost),
          JSON.stringify(resolutionsByRatio(m.cost)),
          m.maxRefs,
          m.quality ?? false,
          m.background ?? false,
          order++,
        ],
      );
    }
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM models WHERE key = ANY($1)`, [MODELS.map((m) => m.key)]);
    await q.query(`DELETE FROM plans WHERE key = ANY($1)`, [PLANS.map((p) => p.key)]);
  }
}
