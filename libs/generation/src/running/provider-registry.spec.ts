import { buildConfig } from '@app/config';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProviderRoute, SimulatedBatchApi, SimulatedProvider } from '@app/providers';
import { LocalStorageDriver } from '@app/storage';
import { ProviderRegistry } from './provider-registry';
import { TaskFailure } from './task-failure';

describe('ProviderRegistry', () => {
  const openai = (apiKeyEnv?: string): ProviderRoute => ({
    type: 'openai',
    baseUrl: 'https://api.example.com/v1',
    model: 'img',
    ...(apiKeyEnv ? { apiKeyEnv } : {}),
  });
  const storage = new LocalStorageDriver({ dataDir: path.join(os.tmpdir(), 'kiln-registry-spec'), publicBaseUrl: 'http://localhost' });
  const registry = new ProviderRegistry(buildConfig({ OPENAI_API_KEY: 'sk-default', OTHER_UPSTREAM_API_KEY: 'sk-other' }), storage);

  it('builds the batch API of a route whose type has one and whose batch setting is enabled, else none', () => {
    expect(registry.forBatchRoute({ type: 'simulated', batch: { enabled: true } })).toBeInstanceOf(SimulatedBatchApi);
    expect(registry.forBatchRoute({ type: 'simulated', batch: { enabled: false } })).toBeNull();
    expect(registry.forBatchRoute({ type: 'simulated' })).toBeNull();
    expect(registry.forBatchRoute({ type: 'builtin', batch: { enabled: true } } as unknown as ProviderRoute)).toBeNull();
  });

  it('builds the provider of the route', () => {
    expect(registry.forRoute({ type: 'simulated' })).toBeInstanceOf(SimulatedProvider);
  });

  it('hands an upstream route the key its variable holds, OPENAI_API_KEY by default', () => {
    const keyOf = (route: ProviderRoute) => (registry.forRoute(route) as unknown as { config?: { apiKey?: string } }).config?.apiKey;
    expect(keyOf(openai())).toBe('sk-default');
    expect(keyOf(openai('OPENAI_API_KEY'))).toBe('sk-default');
    expect(keyOf(openai('OTHER_UPSTREAM_API_KEY'))).toBe('sk-other');
  });

  it('a route with an unset key fails its renders, not the generator', async () => {
    const provider = registry.forRoute(openai('MISSING_API_KEY'));
    await expect(provider.render({} as never)).rejects.toThrow(/MISSING_API_KEY is not set/);
  });

  it('a route that makes no sense fails the task', () => {
    expect(() => registry.forRoute({ type: 'carrier-pigeon' } as unknown as ProviderRoute)).toThrow(TaskFailure);
  });
});
