import { BuiltinProvider } from './builtin/builtin.provider';
import { OpenAiProvider } from './openai/openai.provider';
import { createProvider, ProviderFactoryDeps } from './provider.factory';
import { ProviderError, RenderRequest } from './render.types';
import { SimulatedProvider } from './simulated/simulated.provider';

const request: RenderRequest = {
  prompt: 'p',
  seed: 1,
  width: 1024,
  height: 1024,
  resolution: '1K',
  aspectRatio: '1:1',
  quality: null,
  background: null,
  references: [],
};

function deps(overrides: Partial<ProviderFactoryDeps> = {}): ProviderFactoryDeps {
  return { apiKey: () => 'sk-key', timeoutMs: 1000, upstream: { allowPrivate: false, maxImageBytes: 1024 * 1024 }, ...overrides };
}

describe('createProvider', () => {
  it('shares one builtin renderer', () => {
    const a = createProvider({ type: 'builtin' }, deps());
    const b = createProvider({ type: 'builtin' }, deps());
    expect(a).toBeInstanceOf(BuiltinProvider);
    expect(a).toBe(b);
  });

  it('builds an OpenAI-compatible client with the key from the named variable', () => {
    const lookup = jest.fn().mockReturnValue('sk-key');
    const provider = createProvider(
      { type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm', apiKeyEnv: 'ACME_KEY' },
      deps({ apiKey: lookup }),
    );
    expect(provider).toBeInstanceOf(OpenAiProvider);
    expect(lookup).toHaveBeenCalledWith('ACME_KEY');
  });

  it('fails each render, not the factory, when the key is missing', async () => {
    const provider = createProvider({ type: 'openai', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' }, deps({ apiKey: () => null }));
    const err = await provider.render(request).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({
      kind: 'not_configured',
      retryable: false,
      message: 'The image provider is not configured: OPENAI_API_KEY is not set',
    });
  });

  it('builds a simulated provider with the injected randomness', async () => {
    const provider = createProvider({ type: 'simulated', failureRate: 0.5 }, deps({ random: () => 0.1 }));
    expect(provider).toBeInstanceOf(SimulatedProvider);
    await expect(provider.render(request)).rejects.toMatchObject({ kind: 'upstream_error', retryable: false });
  });
});
