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
    const c = buildConfig({
      PORT: '9000',
      PUBLIC_BASE_URL: 'https://kiln.example.com/',
      GENERATOR_CONCURRENCY: '8',
      MINIO_USE_SSL: 'true',
    });
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

  it('selling credits: off without STRIPE_SECRET_KEY; on with it, STRIPE_API_BASE as the SDK host, port and protocol', () => {
    expect(buildConfig({}).stripe).toBeNull();
    const c = buildConfig({
      STRIPE_SECRET_KEY: 'sk_test_abc123',
      STRIPE_WEBHOOK_SECRET: 'whsec_abc123',
      STRIPE_API_BASE: 'http://127.0.0.1:12111',
      PUBLIC_BASE_URL: 'https://kiln.example.com/',
    });
    expect(c.stripe).toEqual({
      secretKey: 'sk_test_abc123',
      webhookSecret: 'whsec_abc123',
      apiBase: { protocol: 'http', host: '127.0.0.1', port: 12111 },
      timeoutMs: 10_000,
      returnUrlBase: 'https://kiln.example.com/app/credits',
    });
    expect(buildConfig({ STRIPE_SECRET_KEY: 'sk_live_x', STRIPE_WEBHOOK_SECRET: 'whsec_x' }).stripe?.apiBase).toBeNull();
  });

  it.each([
    [{ STRIPE_SECRET_KEY: 'sk_test_abc123' }, /STRIPE_WEBHOOK_SECRET[\s\S]*required when STRIPE_SECRET_KEY is set/],
    [{ STRIPE_SECRET_KEY: 'pk_test_abc123', STRIPE_WEBHOOK_SECRET: 'whsec_x' }, /STRIPE_SECRET_KEY=/],
    [{ STRIPE_SECRET_KEY: 'sk_test_abc123', STRIPE_WEBHOOK_SECRET: 'secret' }, /STRIPE_WEBHOOK_SECRET=/],
    [{ STRIPE_API_BASE: '127.0.0.1:12111' }, /STRIPE_API_BASE=/],
  ])('refuses a Stripe setting that cannot work (%j)', (env, message) => {
    expect(() => buildConfig(env)).toThrow(message);
  });

  it('reads the generator settings and collects upstream keys by name', () => {
    const c = buildConfig({
      QUEUE_LOCK_DURATION_MS: '1000',
      QUEUE_STALLED_INTERVAL_MS: '500',
      TASK_LEASE_MS: '3000',
      OPENAI_API_KEY: 'sk-a',
      OTHER_UPSTREAM_API_KEY: 'sk-b',
      NOT_A_KEY: 'x',
    });
    expect(c.generator).toMatchObject({ lockDurationMs: 1000, stalledIntervalMs: 500, taskLeaseMs: 3000 });
    expect(c.generator.renderConcurrency).toBeGreaterThanOrEqual(1);
    expect(c.providerApiKeys).toEqual({ OPENAI_API_KEY: 'sk-a', OTHER_UPSTREAM_API_KEY: 'sk-b' });
    expect(buildConfig({}).generator).toMatchObject({
      lockDurationMs: 20000,
      stalledIntervalMs: 30000,
      taskLeaseMs: 15000,
      reconcileIntervalMs: 10000,
    });
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

describe('container settings', () => {
  const noFiles = (file: string): string => {
    throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
  };

  it('reads secrets from <NAME>_FILE, dropping one trailing newline', () => {
    const read = (file: string) =>
      ({ '/run/secrets/admin': 'a-very-long-admin-token\n', '/run/secrets/openai': 'sk-x' })[file] ?? noFiles(file);
    const c = buildConfig({ ADMIN_TOKEN_FILE: '/run/secrets/admin', OPENAI_API_KEY_FILE: '/run/secrets/openai' }, read);
    expect(c.adminToken).toBe('a-very-long-admin-token');
    expect(c.providerApiKeys).toEqual({ OPENAI_API_KEY: 'sk-x' });
  });

  it('refuses both NAME and NAME_FILE, and an unreadable file, naming the variable', () => {
    expect(() => buildConfig({ ADMIN_TOKEN: 'x'.repeat(20), ADMIN_TOKEN_FILE: '/x' }, noFiles)).toThrow(
      /ADMIN_TOKEN_FILE: ADMIN_TOKEN is set too/,
    );
    expect(() => buildConfig({ MINIO_SECRET_KEY_FILE: '/missing' }, noFiles)).toThrow(
      /MINIO_SECRET_KEY_FILE="\/missing": cannot read it \(ENOENT\)/,
    );
  });

  it('reads every upstream key variable and its _FILE form (GEMINI_API_KEY, REPLICATE_API_TOKEN, FAL_KEY), never Kiln secrets', () => {
    const read = (file: string) => `${file.split('/').pop()}-value\n`;
    const c = buildConfig(
      {
        GEMINI_API_KEY_FILE: '/run/secrets/gemini',
        REPLICATE_API_TOKEN: 'r8-x',
        FAL_KEY_FILE: '/run/secrets/fal',
        MINIO_SECRET_KEY: 'minio-secret',
      },
      read,
    );
    expect(c.providerApiKeys).toEqual({ GEMINI_API_KEY: 'gemini-value', REPLICATE_API_TOKEN: 'r8-x', FAL_KEY: 'fal-value' });
  });

  it('leaves other *_FILE variables alone', () => {
    expect(() => buildConfig({ SOME_OTHER_FILE: '/missing' }, noFiles)).not.toThrow();
  });

  it('DATABASE_POOL_SIZE defaults to 20 and is validated', () => {
    expect(buildConfig({}).databasePoolSize).toBe(20);
    expect(buildConfig({ DATABASE_POOL_SIZE: '5' }).databasePoolSize).toBe(5);
    expect(() => buildConfig({ DATABASE_POOL_SIZE: '0' })).toThrow(/DATABASE_POOL_SIZE/);
  });

  it('DATABASE_PREPARED_STATEMENTS defaults to on and takes only yes/no words', () => {
    expect(buildConfig({}).databasePreparedStatements).toBe(true);
    expect(buildConfig({ DATABASE_PREPARED_STATEMENTS: 'false' }).databasePreparedStatements).toBe(false);
    expect(buildConfig({ DATABASE_PREPARED_STATEMENTS: 'off' }).databasePreparedStatements).toBe(false);
    expect(() => buildConfig({ DATABASE_PREPARED_STATEMENTS: 'transaction' })).toThrow(/DATABASE_PREPARED_STATEMENTS/);
  });

  it('UPLOAD_TMP_DIR defaults to <DATA_DIR>/incoming', () => {
    expect(buildConfig({ DATA_DIR: '/srv/kiln' }).storage.uploadTmpDir).toBe('/srv/kiln/incoming');
    expect(buildConfig({ DATA_DIR: '/srv/kiln', UPLOAD_TMP_DIR: '/tmp/up' }).storage.uploadTmpDir).toBe('/tmp/up');
  });

  it('GENERATOR_HEALTH_PORT: none unless set', () => {
    expect(buildConfig({}).generator.healthPort).toBeNull();
    expect(buildConfig({ GENERATOR_HEALTH_PORT: '8081' }).generator.healthPort).toBe(8081);
  });

  it('warns in production about public URLs left at localhost', () => {
    expect(buildConfig({}).warnings).toEqual([]);
    const minio = { NODE_ENV: 'production', STORAGE_DRIVER: 'minio', MINIO_ACCESS_KEY: 'k', MINIO_SECRET_KEY: 's' };
    const unset = buildConfig(minio).warnings;
    expect(unset).toEqual([expect.stringMatching(/^PUBLIC_BASE_URL is not set/), expect.stringMatching(/^MINIO_PUBLIC_URL is not set/)]);
    const loopback = buildConfig({
      ...minio,
      PUBLIC_BASE_URL: 'http://127.0.0.1:8080',
      MINIO_PUBLIC_URL: 'https://cdn.example.com/kiln',
    }).warnings;
    expect(loopback).toEqual([expect.stringMatching(/^PUBLIC_BASE_URL=http:\/\/127\.0\.0\.1:8080 points at localhost/)]);
    expect(
      buildConfig({ ...minio, PUBLIC_BASE_URL: 'https://kiln.example.com', MINIO_PUBLIC_URL: 'https://cdn.example.com/kiln' }).warnings,
    ).toEqual([]);
  });
});
