import type { ProviderRoute } from '@app/providers';
import { routeHealth } from './route-health.store';

const gemini = (extra: Record<string, unknown> = {}) =>
  ({ type: 'gemini', baseUrl: 'https://example.com/v1beta', model: 'gemini-3.1-flash-image', ...extra }) as ProviderRoute;

describe('routeHealth reads the key a route needs from its type', () => {
  it('a gemini route needs GEMINI_API_KEY, or the variable it names', () => {
    expect(routeHealth(gemini(), [['OPENAI_API_KEY']], null)).toEqual({ state: 'not_configured', missing: ['GEMINI_API_KEY'] });
    expect(routeHealth(gemini(), [['GEMINI_API_KEY']], null)).toEqual({ state: 'ok', lastSuccessAt: null });
    expect(routeHealth(gemini({ apiKeyEnv: 'STUDIO_GEMINI_API_KEY' }), [['GEMINI_API_KEY']], null)).toEqual({
      state: 'not_configured',
      missing: ['STUDIO_GEMINI_API_KEY'],
    });
  });

  it('an openai route still needs OPENAI_API_KEY; builtin needs none', () => {
    expect(routeHealth({ type: 'openai', baseUrl: 'https://x/v1', model: 'm' }, [[]], null)).toEqual({
      state: 'not_configured',
      missing: ['OPENAI_API_KEY'],
    });
    expect(routeHealth({ type: 'builtin' }, [[]], null)).toEqual({ state: 'ok', lastSuccessAt: null });
  });
});
