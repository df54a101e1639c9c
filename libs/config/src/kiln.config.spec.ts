import { buildConfig } from './kiln.config';

describe('configuration', () => {
  it('has working embedded defaults', () => {
    const c = buildConfig({});
    expect(c.port).toBe(8080);
    expect(c.publicBaseUrl).toBe('http://localhost:8080');
    expect(c.databaseUrl).toBe('postgres://postgres@127.0.0.1:5432/kiln');
    expect(c.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(c.storage.driver).toBe('local');
    expect(c.adminToken).toBeNull();
  });

  it('reads and converts the variables', () => {
    const c = buildConfig({ PORT: '9000', PUBLIC_BASE_URL: 'https://kiln.example.com/', GENERATOR_CONCURRENCY: '8', MINIO_USE_SSL: 'true' });
    expect(c.port).toBe(9000);
    expect(c.publicBaseUrl).toBe('https://kiln.example.com');
    expect(c.generator.concurrency).toBe(8);
    expect(c.storage.minio.useSSL).toBe(true);
  });

  it.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PUBLIC_BASE_URL: 'not a url' }, 'PUBLIC_BASE_URL'],
    [{ STORAGE_DRIVER: 's3' }, 'STORAGE_DRIVER'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN'],
    [{ GENERATOR_CONCURRENCY: '0' }, 'GENERATOR_CONCURRENCY'],
    [{ TRUST_PROXY: 'my-proxy' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: 'loopback,' }, 'TRUST_PROXY'],
  ])('names the wrong variable in its message (%j)', (env, name) => {
    expect(() => buildConfig(env)).toThrow(new RegExp(`Invalid Kiln configuration:[\\s\\S]*${name}=`));
  });

  it('reads the generator settings and collects upstream keys by name', () => {
    const c = buildConfig({ QUEUE_LOCK_DURATION_MS: '1000', QUEUE_STALLED_INTERVAL_MS: '500', TASK_LEASE_MS: '3000', OPENAI_API_KEY: 'sk-a', OTHER_UPSTREAM_API_KEY: 'sk-b', NOT_A_KEY: 'x' });
    expect(c.generator).toMatchObject({ lockDurationMs: 1000, stalledIntervalMs: 500, taskLeaseMs: 3000 });
    expect(c.generator.renderConcurrency).toBeGreaterThanOrEqual(1);
    expect(c.openaiApiKey).toBe('sk-a');
    expect(c.providerApiKeys).toEqual({ OPENAI_API_KEY: 'sk-a', OTHER_UPSTREAM_API_KEY: 'sk-b' });
    expect(buildConfig({}).generator).toMatchObject({ lockDurationMs: 20000, stalledIntervalMs: 30000, taskLeaseMs: 15000, reconcileIntervalMs: 10000 });
    expect(buildConfig({}).storage.orphanGraceMs).toBe(3_600_000);
    expect(buildConfig({ ORPHAN_GRACE_MS: '0' }).storage.orphanGraceMs).toBe(0);
  });

  it('reads TRUST_PROXY as Express takes it: none by default, true, a hop count, or a list', () => {
    expect(buildConfig({}).trustProxy).toBe(false);
    expect(buildConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    expect(buildConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(buildConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(buildConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8, fd00::/8' }).trustProxy).toBe('loopback, 10.0.0.0/8, fd00::/8');
  });

  it('refuses private upstreams unless told otherwise, and caps upstream images at 50 MB', () => {
    expect(buildConfig({}).upstream).toEqual({ allowPrivate: false, maxImageBytes: 50 * 1024 * 1024 });
    expect(buildConfig({ UPSTREAM_ALLOW_PRIVATE: 'true', UPSTREAM_MAX_IMAGE_BYTES: '2048' }).upstream).toEqual({
      allowPrivate: true,
      maxImageBytes: 2048,
    });
    expect(() => buildConfig({ UPSTREAM_MAX_IMAGE_BYTES: '10' })).toThrow(/UPSTREAM_MAX_IMAGE_BYTES=/);
  });

  it('requires MinIO credentials when the MinIO driver is chosen', () => {
    expect(() => buildConfig({ STORAGE_DRIVER: 'minio' })).toThrow(/MINIO_ACCESS_KEY/);
  });
});
