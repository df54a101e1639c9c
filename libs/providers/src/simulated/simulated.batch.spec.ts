import sharp from 'sharp';
import { RouteSettingsError } from '../provider-type';
import { validateRoute, withDefaults } from '../provider-types.registry';
import { BatchObjectStore, routeBatchSettings, UpstreamBatchResult } from '../upstream-batch';
import { SIMULATED_BATCH_MARKERS, SimulatedBatchApi } from './simulated.batch';

async function all(results: AsyncIterable<UpstreamBatchResult>): Promise<UpstreamBatchResult[]> {
  const out: UpstreamBatchResult[] = [];
  for await (const r of results) out.push(r);
  return out;
}

/** The store a generator passes, in memory. */
function memoryStore(): BatchObjectStore & { objects: Map<string, Buffer> } {
  const objects = new Map<string, Buffer>();
  return {
    objects,
    put: (key, body) => Promise.resolve(void objects.set(key, body)),
    get: (key) => Promise.resolve(objects.get(key) ?? null),
    remove: (key) => Promise.resolve(void objects.delete(key)),
  };
}

const request = (prompt: string) => ({
  prompt,
  seed: 1,
  width: 1360,
  height: 768,
  resolution: '1K' as const,
  aspectRatio: '16:9',
  quality: null,
  background: null,
  references: [],
});

describe('the batch route setting', () => {
  it('is checked by the type schema: enabled a boolean, numbers in range, no unknown keys; delayMs for simulated only', () => {
    expect(() =>
      validateRoute({ type: 'simulated', batch: { enabled: true, collectMs: 0, maxRequests: 10, pollIntervalMs: 100, delayMs: 5 } }),
    ).not.toThrow();
    const reason = (batch: unknown) => {
      try {
        validateRoute({ type: 'simulated', batch });
        return null;
      } catch (err) {
        return err instanceof RouteSettingsError ? `${err.field}:${err.reason}` : String(err);
      }
    };
    expect(reason({ collectMs: 5 })).toBe('provider.batch:invalid');
    expect(reason({ enabled: 'yes' })).toBe('provider.batch:invalid');
    expect(reason({ enabled: true, maxRequests: 0 })).toBe('provider.batch:invalid');
    expect(reason({ enabled: true, pollIntervalMs: 10 })).toBe('provider.batch:invalid');
    expect(reason({ enabled: true, window: '24h' })).toBe('provider.batch:unknown_key');
    expect(reason([])).toBe('provider.batch:invalid');
  });

  it('fills BATCH_DEFAULTS for what the route omits, and says none when absent or disabled', () => {
    expect(routeBatchSettings(withDefaults({ type: 'simulated', batch: { enabled: true } } as never))).toEqual({
      enabled: true,
      collectMs: 60_000,
      maxRequests: 50_000,
      pollIntervalMs: 30_000,
    });
    expect(routeBatchSettings({ type: 'simulated', batch: { enabled: false } })).toBeNull();
    expect(routeBatchSettings({ type: 'simulated' })).toBeNull();
  });
});

describe('SimulatedBatchApi', () => {
  it('upload, create (tagged with the group), find by group, poll until delayMs, results in another order with marked lines failing', async () => {
    const store = memoryStore();
    const api = new SimulatedBatchApi({ delayMs: 50, failureRate: 0, pollIntervalMs: 10 }, store);
    const keys = Array.from({ length: 20 }, (_, i) => `k${i}`);
    const lines = keys.map((key, i) =>
      api.encodeLine({
        key,
        request: request(i === 3 ? `no ${SIMULATED_BATCH_MARKERS.refuse}` : i === 4 ? `x ${SIMULATED_BATCH_MARKERS.fail}` : `p${i}`),
      }),
    );
    expect(await api.findBatch('g1')).toBeNull();
    const { inputId } = await api.uploadInput(lines, 'g1');
    const ref = await api.createBatch(inputId, 'g1');
    expect(await api.findBatch('g1')).toEqual(ref);
    expect(await api.poll(ref)).toMatchObject({ state: 'waiting' });
    await new Promise((r) => setTimeout(r, 60));
    const ended = await api.poll(ref);
    expect(ended).toMatchObject({ state: 'ended', outcome: 'completed' });
    if (ended.state !== 'ended') throw new Error('not ended');
    const results = await all(api.results(ref, ended));
    expect(results.map((r) => r.key).sort()).toEqual([...keys].sort());
    expect(results.map((r) => r.key)).not.toEqual(keys);
    const byKey = new Map(results.map((r) => [r.key, r]));
    expect(byKey.get('k3')).toMatchObject({ ok: false, error: { kind: 'content_refused', retryable: false } });
    expect(byKey.get('k4')).toMatchObject({ ok: false, error: { kind: 'upstream_error', retryable: false } });
    const ok = byKey.get('k0');
    if (!ok?.ok) throw new Error('k0 failed');
    const meta = await sharp(ok.image.data).metadata();
    expect([meta.format, meta.width, meta.height, ok.image.width, ok.image.height]).toEqual(['png', 64, 36, 64, 36]);
    // A second read answers the same outcomes (a crash while reading results reads them again).
    const again = await all(api.results(ref, ended));
    expect(again.map((r) => [r.key, r.ok])).toEqual(results.map((r) => [r.key, r.ok]));
  });

  it('fails a share of lines at failureRate, the same lines on every read', async () => {
    const api = new SimulatedBatchApi({ delayMs: 0, failureRate: 0.3, pollIntervalMs: 10 }, memoryStore());
    const lines = Array.from({ length: 200 }, (_, i) => api.encodeLine({ key: `k${i}`, request: request(`p${i}`) }));
    const ref = await api.createBatch((await api.uploadInput(lines, 'g')).inputId, 'g');
    const ended = await api.poll(ref);
    if (ended.state !== 'ended') throw new Error('not ended');
    const failed = (await all(api.results(ref, ended))).filter((r) => !r.ok).length;
    expect(failed).toBeGreaterThan(30);
    expect(failed).toBeLessThan(90);
  });

  it('an expiring batch delivers only the lines it ran; a cancelled one ends cancelled', async () => {
    const api = new SimulatedBatchApi({ delayMs: 0, failureRate: 0, pollIntervalMs: 10 }, memoryStore());
    const lines = ['a', `b ${SIMULATED_BATCH_MARKERS.expire}`, 'c'].map((p, i) => api.encodeLine({ key: `k${i}`, request: request(p) }));
    const ref = await api.createBatch((await api.uploadInput(lines, 'g')).inputId, 'g');
    const ended = await api.poll(ref);
    expect(ended).toMatchObject({ state: 'ended', outcome: 'expired' });
    if (ended.state !== 'ended') throw new Error('not ended');
    expect((await all(api.results(ref, ended))).map((r) => r.key).sort()).toEqual(['k0', 'k2']);

    const slow = new SimulatedBatchApi({ delayMs: 60_000, failureRate: 0, pollIntervalMs: 10 }, memoryStore());
    const sref = await slow.createBatch((await slow.uploadInput([lines[0]], 'h')).inputId, 'h');
    await slow.cancel(sref);
    expect(await slow.poll(sref)).toMatchObject({ state: 'ended', outcome: 'cancelled' });
  });

  it('with the test-only hang at a step, that step never answers, once per group', async () => {
    const store = memoryStore();
    const api = new SimulatedBatchApi({ delayMs: 0, failureRate: 0, pollIntervalMs: 10 }, store, 'after-upload');
    const outcome = await Promise.race([
      api.uploadInput(['{}'], 'g').then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('hung'), 100)),
    ]);
    expect(outcome).toBe('hung');
    expect(store.objects.has('simulated/hung/after-upload-g')).toBe(true);
    await expect(api.uploadInput(['{}'], 'g')).resolves.toMatchObject({ inputId: expect.stringMatching(/^sim-input-/) });
  });
});
