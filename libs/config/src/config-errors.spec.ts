import { buildConfig } from './kiln.config';
import { ConfigurationError } from './env.schema';
import { editDistance, knownVariables, lookalikeWarnings } from './lookalike-variables';

function problemsOf(env: Record<string, string>): string {
  try {
    buildConfig(env, () => {
      throw Object.assign(new Error('missing'), { code: 'ENOENT' });
    });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigurationError);
    return (err as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

describe('configuration errors', () => {
  // Each bad value: the one line naming the variable, the value as given, and the rule.
  it.each([
    [{ PORT: 'abc' }, 'PORT="abc": must be an integer number'],
    [{ PORT: '70000' }, 'PORT="70000": must not be greater than 65535'],
    [{ PORT: '-1' }, 'PORT="-1": must not be less than 0'],
    [{ GENERATOR_CONCURRENCY: '1.5' }, 'GENERATOR_CONCURRENCY="1.5": must be an integer number'],
    [{ GENERATOR_CONCURRENCY: '0' }, 'GENERATOR_CONCURRENCY="0": must not be less than 1'],
    [{ MINIO_USE_SSL: 'maybe' }, 'MINIO_USE_SSL="maybe": must be a boolean value'],
    [{ UPSTREAM_ALLOW_PRIVATE: 'sure' }, 'UPSTREAM_ALLOW_PRIVATE="sure": must be a boolean value'],
    [{ STORAGE_DRIVER: 's3' }, 'STORAGE_DRIVER="s3": must be one of the following values: local, minio'],
    [{ NODE_ENV: 'prod' }, 'NODE_ENV="prod": must be one of the following values: development, production, test'],
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL="verbose": must be one of the following values'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN="short": must be longer than or equal to 16 characters'],
    [{ PUBLIC_BASE_URL: 'not a url' }, 'PUBLIC_BASE_URL="not a url": must be a URL address'],
    [{ TRUST_PROXY: 'my-proxy' }, 'TRUST_PROXY="my-proxy": must be true, false, a hop count'],
    [{ STORAGE_DRIVER: 'minio' }, 'STORAGE_DRIVER="minio": needs MINIO_ACCESS_KEY and MINIO_SECRET_KEY'],
    [{ ADMIN_TOKEN_FILE: '/run/secrets/none' }, 'ADMIN_TOKEN_FILE="/run/secrets/none": cannot read it (ENOENT)'],
  ])('%j: %s', (env, line) => {
    const message = problemsOf(env);
    expect(message.split('\n')).toEqual(['Invalid Kiln configuration:', expect.stringContaining(`  ${line}`)]);
  });

  it('names every problem in one block, one line each', () => {
    const message = problemsOf({ PORT: 'abc', MINIO_USE_SSL: 'maybe', ADMIN_TOKEN_FILE: '/nope' });
    const lines = message.split('\n');
    expect(lines[0]).toBe('Invalid Kiln configuration:');
    expect(lines.slice(1).sort()).toEqual([
      '  ADMIN_TOKEN_FILE="/nope": cannot read it (ENOENT)',
      '  MINIO_USE_SSL="maybe": must be a boolean value',
      '  PORT="abc": must be an integer number',
    ]);
  });

  it('keeps yes/no words for booleans', () => {
    expect(buildConfig({ MINIO_USE_SSL: 'off' }).storage.minio.useSSL).toBe(false);
    expect(buildConfig({ MINIO_USE_SSL: 'YES' }).storage.minio.useSSL).toBe(true);
  });
});

describe('look-alike variables', () => {
  it('knows every variable the schema declares', () => {
    expect(knownVariables()).toEqual(expect.arrayContaining(['PORT', 'GENERATOR_CONCURRENCY', 'REDIS_URL', 'GENERATOR_HEALTH_PORT']));
  });

  it('warns about misspellings and unknown names with Kiln prefixes, and nothing else', () => {
    expect(
      lookalikeWarnings({
        GENERATOR_CONCURENCY: '3',
        REDIS_PREFX: 'x',
        QUEUE_DEEPTH_MAX: '1',
        KILN_MODE: 'fast',
        PATH: '/usr/bin',
        HOME: '/root',
        HTTP_PROXY: 'http://proxy',
        OTHER_API_KEY: 'sk',
        ADMIN_TOKEN_FILE: '/run/secrets/a',
        PORT: '8080',
        npm_config_cache: '/x',
        // Read by other parts of Kiln (the stage timeline, the SDK and CLI, the bench): not typos.
        KILN_STAGE_TIMELINE: '/tmp/stages',
        KILN_API_KEY: 'kiln_live_x',
        KILN_URL: 'http://localhost:8080',
        KILN_SESSION: 'kiln_sess_x',
        KILN_BENCH_PEER_ROUNDS: '20',
      }),
    ).toEqual([
      'GENERATOR_CONCURENCY is not a Kiln variable and is ignored; did you mean GENERATOR_CONCURRENCY?',
      "KILN_MODE is not a Kiln variable and is ignored (see the README's configuration table)",
      "QUEUE_DEEPTH_MAX is not a Kiln variable and is ignored (see the README's configuration table)",
      'REDIS_PREFX is not a Kiln variable and is ignored; did you mean REDIS_PREFIX?',
    ]);
  });

  it('reaches the boot warnings', () => {
    expect(buildConfig({ GENERATOR_CONCURENCY: '3' }).warnings).toContain(
      'GENERATOR_CONCURENCY is not a Kiln variable and is ignored; did you mean GENERATOR_CONCURRENCY?',
    );
  });

  it('measures edit distance', () => {
    expect(editDistance('GENERATOR_CONCURENCY', 'GENERATOR_CONCURRENCY')).toBe(1);
    expect(editDistance('abc', 'abc')).toBe(0);
    expect(editDistance('kitten', 'sitting')).toBe(3);
  });
});
