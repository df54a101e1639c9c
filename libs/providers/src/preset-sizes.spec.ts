import { pixelSize } from './image-size';
import type { ProviderPreset, RouteBase } from './provider-type';
import { expandRoute, PROVIDER_TYPES, providerType } from './provider-types.registry';
import type { RenderResolution } from './render.types';
import { ReplicateProvider, ReplicateRoute } from './replicate/replicate.provider';
import { replicateMadeSize } from './replicate/replicate.sizes';

/** What the preset's route makes for Kiln's size of a pair, by its type's own size rule (null: exactly what is asked). */
function madeBy(preset: ProviderPreset, ratio: string, resolution: RenderResolution) {
  const def = providerType(preset.type)!;
  const asked = pixelSize(ratio, resolution);
  const route = expandRoute({ preset: preset.id }) as RouteBase;
  return { asked, made: def.sizeFor?.(route, { ...asked, aspectRatio: ratio, resolution }) ?? asked };
}

const offered = PROVIDER_TYPES.flatMap((t) =>
  t.presets.flatMap((preset) =>
    Object.entries(preset.model.resolutionsByRatio).flatMap(([ratio, resolutions]) =>
      resolutions.map((resolution) => [preset.id, ratio, resolution, preset] as const),
    ),
  ),
);

describe('honest sizes for every preset', () => {
  it('walks every pair of every preset', () => {
    expect(new Set(offered.map(([id]) => id)).size).toBe(PROVIDER_TYPES.reduce((n, t) => n + t.presets.length, 0));
  });

  it.each(offered.map(([id, ratio, resolution, preset]) => [id, ratio, resolution, preset]))(
    '%s offers %s at %s: made within 3 %% of the ratio and at least 0.8 of the area',
    (_id, ratio, resolution, preset) => {
      const { asked, made } = madeBy(preset, ratio, resolution);
      const ratioError = Math.abs(made.width / made.height / (asked.width / asked.height) - 1);
      expect({ made, ratioError: ratioError <= 0.03 }).toEqual({ made, ratioError: true });
      expect(made.width * made.height).toBeGreaterThanOrEqual(0.8 * asked.width * asked.height);
    },
  );
});

describe('replicate sizes', () => {
  const route = (sizeInput: ReplicateRoute['sizeInput']): ReplicateRoute => ({
    type: 'replicate',
    model: 'black-forest-labs/flux-1.1-pro',
    sizeInput,
  });

  it("aspect_ratio makes FLUX's own size per ratio: 3:4, 4:3, 4:5, 5:4 are 4-5 % off Kiln's sizes", () => {
    expect(replicateMadeSize(route('aspect_ratio'), pixelSize('3:4', '1K'))).toEqual({ width: 896, height: 1152 });
    expect(replicateMadeSize(route('aspect_ratio'), pixelSize('4:3', '1K'))).toEqual({ width: 1152, height: 896 });
    expect(replicateMadeSize(route('aspect_ratio'), pixelSize('4:5', '1K'))).toEqual({ width: 896, height: 1088 });
    expect(replicateMadeSize(route('aspect_ratio'), pixelSize('5:4', '1K'))).toEqual({ width: 1088, height: 896 });
    expect(replicateMadeSize(route('aspect_ratio'), pixelSize('16:9', '1K'))).toEqual({ width: 1344, height: 768 });
  });

  it('aspect_ratio_custom sends aspect_ratio "custom" with the exact width and height', () => {
    const provider = new ReplicateProvider(route('aspect_ratio_custom'), {
      apiKey: 'k',
      timeoutMs: 1000,
      allowPrivate: true,
      maxImageBytes: 1,
    });
    const asked = pixelSize('3:4', '1K');
    const input = provider.input({ prompt: 'p', seed: 1, references: [], ...asked } as unknown as Parameters<
      ReplicateProvider['input']
    >[0]);
    expect(input).toMatchObject({ aspect_ratio: 'custom', width: 896, height: 1184 });
    expect(replicateMadeSize(route('aspect_ratio_custom'), asked)).toEqual({ width: 896, height: 1184 });
  });
});
