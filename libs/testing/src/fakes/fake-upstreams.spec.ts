import { PROVIDER_TYPES, ProviderTypeDefinition, RouteBase } from '@app/providers';
import { FAKE_UPSTREAMS } from './fake-upstreams';
import type { FakeUpstream } from './fake-upstream';

/** A type calls an upstream when it needs a key for it (keyVariable); each such type needs a fake, and only those. */
function fakeProblems(
  types: readonly ProviderTypeDefinition<RouteBase>[],
  fakes: Record<string, (() => FakeUpstream) | null | undefined>,
): string[] {
  const problems: string[] = [];
  for (const t of types) {
    const fake = fakes[t.type];
    if (fake === undefined) problems.push(`${t.type}: not in FAKE_UPSTREAMS`);
    else if (t.keyVariable !== null && typeof fake !== 'function') problems.push(`${t.type}: no fake upstream`);
    else if (t.keyVariable === null && fake !== null) problems.push(`${t.type}: calls no upstream yet has a fake`);
  }
  return problems;
}

describe('fake upstreams', () => {
  const types = PROVIDER_TYPES as unknown as ProviderTypeDefinition<RouteBase>[];

  it('every registered type that calls an upstream has a fake, and only those', () => {
    expect(fakeProblems(types, FAKE_UPSTREAMS)).toEqual([]);
  });

  it('refuses a type that calls an upstream without a fake', () => {
    expect(fakeProblems(types, { ...FAKE_UPSTREAMS, openai: null })).toEqual(['openai: no fake upstream']);
    expect(fakeProblems(types, { ...FAKE_UPSTREAMS, fal: undefined })).toEqual(['fal: not in FAKE_UPSTREAMS']);
  });

  it('each fake starts on 127.0.0.1 and records what it is sent', async () => {
    for (const make of Object.values(FAKE_UPSTREAMS)) {
      if (!make) continue;
      const fake = make();
      const base = await fake.start();
      try {
        expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+/);
        await fetch(`${base}/anything`, { method: 'POST', body: '{}' }).then((r) => r.arrayBuffer());
        expect(fake.requests).toHaveLength(1);
      } finally {
        await fake.stop();
      }
    }
  });
});
