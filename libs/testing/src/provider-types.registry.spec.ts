import * as fs from 'node:fs';
import * as path from 'node:path';
import { isUpstreamKeyName } from '@app/config';
import {
  expandRoute,
  metricsLabel,
  pairsRouteCannotMake,
  PROVIDER_TYPES,
  ProviderRoute,
  ProviderTypeDefinition,
  routeLabel,
  RouteBase,
  routeWarnings,
} from '@app/providers';

const PROVIDERS_SRC = path.resolve(__dirname, '../../providers/src');

/** What every registry entry must carry for "adding a type is one folder plus one registry line" to hold. */
function registryProblems(types: readonly ProviderTypeDefinition<RouteBase>[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const t of types) {
    const name = t.type || '(no type)';
    if (seen.has(t.type)) problems.push(`${name}: listed twice`);
    seen.add(t.type);
    if (!Array.isArray(t.settings)) problems.push(`${name}: no settings schema`);
    else if (t.settings.some((s) => typeof s.check !== 'function' || !s.name || !s.description))
      problems.push(`${name}: a setting without name, description or check`);
    if (!Array.isArray(t.presets) || t.presets.length === 0) problems.push(`${name}: no presets`);
    else {
      for (const p of t.presets) {
        if (p.type !== t.type || !p.id.startsWith(`${t.type}/`)) problems.push(`${name}: preset ${p.id} is not of its type`);
        if (!p.model || Object.keys(p.model.resolutionsByRatio ?? {}).length === 0)
          problems.push(`${name}: preset ${p.id} offers no pairs`);
      }
    }
    if (t.keyVariable !== null && !isUpstreamKeyName(t.keyVariable))
      problems.push(`${name}: ${t.keyVariable} is not read by the config as an upstream key`);
    if (!t.metricsLabel) problems.push(`${name}: no metrics label`);
    if (typeof t.create !== 'function') problems.push(`${name}: no create`);
  }
  return problems;
}

describe('provider types registry', () => {
  const types = PROVIDER_TYPES as unknown as ProviderTypeDefinition<RouteBase>[];

  it('every type carries its settings schema, presets, key and label (its fake: fakes/fake-upstreams.spec.ts)', () => {
    expect(types.length).toBeGreaterThanOrEqual(3);
    expect(registryProblems(types)).toEqual([]);
  });

  it('every type folder under libs/providers/src is in the registry, and every registry type has its folder', () => {
    const folders = fs
      .readdirSync(PROVIDERS_SRC, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
    expect(folders).toEqual(types.map((t) => t.type).sort());
    for (const t of types) expect(fs.existsSync(path.join(PROVIDERS_SRC, t.type, `${t.type}.type.ts`))).toBe(true);
  });

  it('each type labels its metrics and logs itself', () => {
    const gemini = { type: 'gemini', model: 'gemini-3.1-flash-image' } as ProviderRoute;
    expect(metricsLabel(gemini)).toBe('gemini');
    expect(routeLabel(gemini)).toBe('gemini https://generativelanguage.googleapis.com/v1beta (gemini-3.1-flash-image)');
    expect(metricsLabel({ type: 'builtin' })).toBe('builtin');
    expect(metricsLabel({ type: 'carrier-pigeon' } as unknown as ProviderRoute)).toBe('unknown');
  });

  it('routeWarnings: a preset retiring within 30 days, or retired; nothing before, nor without a preset', () => {
    const mini = expandRoute({ preset: 'openai/gpt-image-1-mini' }) as ProviderRoute;
    expect(routeWarnings(mini, new Date('2026-10-01T00:00:00Z'))).toEqual([]);
    expect(routeWarnings(mini, new Date('2026-11-05T00:00:00Z'))).toEqual([
      expect.objectContaining({ code: 'preset_retiring', retiresAt: '2026-12-01' }),
    ]);
    expect(routeWarnings(mini, new Date('2026-12-02T00:00:00Z'))).toEqual([expect.objectContaining({ code: 'preset_retired' })]);
    expect(routeWarnings({ type: 'openai', model: 'gpt-image-1-mini' } as ProviderRoute, new Date('2026-12-02T00:00:00Z'))).toEqual([]);
  });

  it('every preset can honestly make the pairs it offers', () => {
    for (const t of types) {
      for (const p of t.presets) {
        const route = expandRoute({ preset: p.id }) as ProviderRoute;
        expect({ preset: p.id, refused: pairsRouteCannotMake(route, p.model.resolutionsByRatio) }).toEqual({ preset: p.id, refused: [] });
      }
    }
  });

  it('preset ids are unique across types', () => {
    const ids = types.flatMap((t) => t.presets.map((p) => p.id));
    expect(new Set(ids).size).toBe(ids.length);
  });

  describe('refuses', () => {
    const good = types.find((t) => t.type === 'openai')!;

    it('an entry without settings schema or presets', () => {
      const without = (change: object) => registryProblems([{ ...good, ...change }]);
      expect(without({ settings: undefined })).toEqual(['openai: no settings schema']);
      expect(without({ presets: [] })).toEqual(['openai: no presets']);
    });

    it('a key variable the config would not read', () => {
      expect(registryProblems([{ ...good, keyVariable: 'MINIO_SECRET_KEY' }])).toEqual([
        'openai: MINIO_SECRET_KEY is not read by the config as an upstream key',
      ]);
    });
  });
});
