import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { availableCpus } from './cpus';
import { ConfigProblem, ConfigurationError, EnvSchema, isUpstreamKeyName, resolveSecretFiles, validateEnv } from './env.schema';
import { lookalikeWarnings } from './lookalike-variables';

export interface KilnConfig {
  env: 'development' | 'production' | 'test';
  port: number;
  publicBaseUrl: string;
  databaseUrl: string;
  /** Wait for a new PostgreSQL connection; past it the request answers 503 instead of hanging. */
  databaseConnectTimeoutMs: number;
  databaseQueryTimeoutMs: number;
  /**
   * Whether the hot paths' statements are named and prepared once per connection, and each
   * connection carries its session settings (statement_timeout, the generator's
   * synchronous_commit). Off behind a transaction-mode pooler, where a client's statements
   * land on any server connection (docs/operations.md, PgBouncer).
   */
  databasePreparedStatements: boolean;
  /** Limits of the api's HTTP server against slow and greedy clients. */
  http: {
    requestTimeoutMs: number;
    headersTimeoutMs: number;
    /** 0: no cap. Counted per socket address, so behind a proxy it counts the proxy. */
    maxConnectionsPerIp: number;
  };
  /** The OpenAI-compatible door (POST /v1/images/...). */
  openaiCompat: { waitMs: number };
  /** What a web app sign-up starts with: SIGNUP_PLAN and SIGNUP_CREDITS. */
  signup: { plan: string; credits: number };
  /** node-postgres pool size of each process. */
  databasePoolSize: number;
  redisUrl: string;
  redisPrefix: string;
  /** ioredis commandTimeout for Kiln's own client and the api's queue client. */
  redisCommandTimeoutMs: number;
  /** Throttles on authentication and on dashboard sessions (per minute). */
  auth: {
    failuresPerIpPerMinute: number;
    dashboardRequestsPerMinute: number;
  };
  adminToken: string | null;
  /** The built web app (apps/web, `npm run build`) the api serves at /app/. */
  webAppDir: string;
  /** What one credit is worth in USD: revenue in the operator's usage report (GET /v1/admin/usage). */
  creditValueUsd: number;
  storage: {
    driver: 'local' | 'minio';
    dataDir: string;
    /** Where multipart upload files wait while their request is handled. */
    uploadTmpDir: string;
    retentionDays: number;
    /** Batch archives streamed at once by one api process, and by one account on it. */
    archiveMaxConcurrent: number;
    archiveMaxPerAccount: number;
    /** Objects no row references are removed once they are this old (OrphanSweepService). */
    orphanGraceMs: number;
    minio: {
      endPoint: string;
      port: number;
      useSSL: boolean;
      accessKey: string;
      secretKey: string;
      bucket: string;
      publicUrl: string;
      /** Longest a call may go without a byte either way. */
      timeoutMs: number;
    };
  };
  generator: {
    concurrency: number;
    /** CPUs this process may use (cores capped by the cgroup quota): the default render concurrency. */
    cpus: number;
    /** Port of the generator's /healthz and /readyz listener; null: none. */
    healthPort: number | null;
    renderConcurrency: number;
    maxAttempts: number;
    backoffMs: number;
    providerTimeoutMs: number;
    modelConcurrencyCap: number;
    reconcileIntervalMs: number;
    shutdownGraceMs: number;
    /** Bull lockDuration: a killed worker's job is dead (the reconciler hands it back) once this passes. */
    lockDurationMs: number;
    /** Bull stalledInterval: how often a worker moves jobs with expired locks back to waiting. */
    stalledIntervalMs: number;
    /** A running task untouched this long whose job is not live (or dead) is re-enqueued by the reconciler. */
    taskLeaseMs: number;
    /** Tasks waiting on queue upstreams one poller holds in memory (UpstreamPoller). */
    upstreamPollerCapacity: number;
    /** A poller's lease on its waiting tasks; a dead generator's are taken over once it passes. */
    upstreamLeaseMs: number;
    /** How often the economy collector looks for work (ECONOMY_TICK_MS). */
    economyTickMs: number;
    /** Test-only (SIMULATED_BATCH_HANG_AT): where the simulated batch API hangs; null: never. */
    simulatedBatchHangAt: string | null;
  };
  /** How tasks get from PostgreSQL into the queue (TaskDispatchService). */
  queue: {
    /** A new batch's first tasks, enqueued by the request that created it. */
    dispatchWindow: number;
    /** Jobs each generator keeps waiting; the rest of the backlog stays `pending` in PostgreSQL. */
    depth: number;
    feedIntervalMs: number;
  };
  /** What Kiln accepts from OpenAI-compatible upstreams, whose answers it does not trust. */
  upstream: {
    /**
     * Routes may point at plain http and non-public addresses (a self-hosted model, tests);
     * their result URLs then may too, on the route's own origin only.
     */
    allowPrivate: boolean;
    maxImageBytes: number;
  };
  /** Webhook endpoints and their deliveries (libs/webhooks). */
  webhooks: {
    /** AES-256-GCM key for the signing secrets at rest; null: endpoints cannot be created or signed for. */
    secretKey: Buffer | null;
    /** Earlier keys, for decryption only (rotation of the key itself). */
    previousSecretKeys: Buffer[];
    /** Delay before retry n (1-based) is retryDelaysMs[n - 1]; after the last, the delivery fails. */
    retryDelaysMs: number[];
    /** http and non-public addresses allowed: development and tests only. */
    allowPrivate: boolean;
    timeoutMs: number;
    pollIntervalMs: number;
    /** Attempts in flight per generator, and per endpoint and per account (all its endpoints) per generator. */
    maxInFlight: number;
    endpointConcurrency: number;
    accountConcurrency: number;
    /** Failures in a row that open an endpoint's circuit, and how long it first stays open. */
    circuitFailures: number;
    circuitCooldownMs: number;
  };
  /**
   * The upstream keys, by variable name, for every provider type (OPENAI_API_KEY like any
   * other): every environment variable whose name is an upstream key's (isUpstreamKeyName:
   * `*_API_KEY`, `*_API_TOKEN`, a type's own key variable such as FAL_KEY), so routes never
   * read the environment. A route takes its type's keyVariable, or the one its `apiKeyEnv` names.
   */
  providerApiKeys: Record<string, string>;
  /** Selling credits through Stripe Checkout (libs/payments); null: the feature is off. */
  stripe: StripeConfig | null;
  logLevel: string;
  /** Express's `trust proxy`: false (the default), true, a hop count, or a list of addresses. */
  trustProxy: boolean | number | string;
  /** Settings that work but are likely wrong for this deployment; each app logs them at boot. */
  warnings: string[];
}

export const KILN_CONFIG = Symbol('KILN_CONFIG');

/** Turns the validated environment into the typed config object every module injects. */
export function buildConfig(
  given: Record<string, unknown> = process.env,
  readFile: (file: string) => string = (file) => readFileSync(file, 'utf8'),
): KilnConfig {
  // Every problem is collected first, so one boot names them all.
  const problems: ConfigProblem[] = [];
  const raw = resolveSecretFiles(given, readFile, problems);
  const env: EnvSchema = validateEnv(raw, problems);
  const port = env.PORT ?? 8080;
  const concurrency = env.GENERATOR_CONCURRENCY ?? 50;
  const minioEndpoint = env.MINIO_ENDPOINT ?? '127.0.0.1';
  const minioPort = env.MINIO_PORT ?? 9000;
  const minioSsl = env.MINIO_USE_SSL ?? false;
  const driver = (env.STORAGE_DRIVER ?? 'local') as 'local' | 'minio';
  if (driver === 'minio' && (!env.MINIO_ACCESS_KEY || !env.MINIO_SECRET_KEY)) {
    problems.push({ variable: 'STORAGE_DRIVER', value: 'minio', rule: 'needs MINIO_ACCESS_KEY and MINIO_SECRET_KEY' });
  }
  if (env.STRIPE_SECRET_KEY && !env.STRIPE_WEBHOOK_SECRET) {
    // Payments would be taken and never credited.
    problems.push({ variable: 'STRIPE_WEBHOOK_SECRET', rule: 'is required when STRIPE_SECRET_KEY is set' });
  }
  if (problems.length > 0) throw new ConfigurationError(problems);
  const bucket = env.MINIO_BUCKET ?? 'kiln';
  const requestTimeout = env.HTTP_REQUEST_TIMEOUT_MS ?? 30000;
  const dataDir = path.resolve(env.DATA_DIR ?? './data');
  const cpus = availableCpus();
  return {
    env: (env.NODE_ENV ?? 'development') as KilnConfig['env'],
    port,
    publicBaseUrl: (env.PUBLIC_BASE_URL ?? `http://localhost:${port}`).replace(/\/+$/, ''),
    databaseUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln',
    databaseConnectTimeoutMs: env.DATABASE_CONNECT_TIMEOUT_MS ?? 5000,
    databaseQueryTimeoutMs: env.DATABASE_QUERY_TIMEOUT_MS ?? 10_000,
    databasePreparedStatements: env.DATABASE_PREPARED_STATEMENTS ?? true,
    http: {
      requestTimeoutMs: requestTimeout,
      // Node requires the headers' limit to be within the whole request's.
      headersTimeoutMs: Math.min(env.HTTP_HEADERS_TIMEOUT_MS ?? requestTimeout, requestTimeout),
      maxConnectionsPerIp: env.MAX_CONNECTIONS_PER_IP ?? 256,
    },
    openaiCompat: { waitMs: env.OPENAI_COMPAT_WAIT_MS ?? 120_000 },
    signup: { plan: env.SIGNUP_PLAN ?? 'free', credits: env.SIGNUP_CREDITS ?? 0 },
    databasePoolSize: env.DATABASE_POOL_SIZE ?? 20,
    redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisPrefix: env.REDIS_PREFIX ?? 'kiln',
    redisCommandTimeoutMs: env.REDIS_COMMAND_TIMEOUT_MS ?? 500,
    auth: {
      failuresPerIpPerMinute: env.AUTH_FAILURES_PER_IP_PER_MINUTE ?? 30,
      dashboardRequestsPerMinute: env.DASHBOARD_REQUESTS_PER_MINUTE ?? 120,
    },
    adminToken: env.ADMIN_TOKEN ?? null,
    webAppDir: path.resolve(env.WEB_APP_DIR ?? 'dist/web'),
    creditValueUsd: env.CREDIT_VALUE_USD ?? 0.01,
    storage: {
      driver,
      dataDir,
      uploadTmpDir: path.resolve(env.UPLOAD_TMP_DIR ?? path.join(dataDir, 'incoming')),
      retentionDays: env.RETENTION_DAYS ?? 30,
      archiveMaxConcurrent: env.ARCHIVE_MAX_CONCURRENT ?? 8,
      archiveMaxPerAccount: env.ARCHIVE_MAX_PER_ACCOUNT ?? 2,
      // Far longer than any run takes between storing its image and recording it.
      orphanGraceMs: env.ORPHAN_GRACE_MS ?? 3_600_000,
      minio: {
        endPoint: minioEndpoint,
        port: minioPort,
        useSSL: minioSsl,
        accessKey: env.MINIO_ACCESS_KEY ?? '',
        secretKey: env.MINIO_SECRET_KEY ?? '',
        bucket,
        publicUrl: (env.MINIO_PUBLIC_URL ?? `${minioSsl ? 'https' : 'http'}://${minioEndpoint}:${minioPort}/${bucket}`).replace(/\/+$/, ''),
        timeoutMs: env.MINIO_TIMEOUT_MS ?? 10_000,
      },
    },
    generator: {
      concurrency,
      cpus,
      healthPort: env.GENERATOR_HEALTH_PORT ? env.GENERATOR_HEALTH_PORT : null,
      // Builtin renders are CPU-bound: one at a time per CPU the container may use by default.
      renderConcurrency: env.RENDER_CONCURRENCY ?? Math.min(64, cpus),
      maxAttempts: env.TASK_MAX_ATTEMPTS ?? 4,
      backoffMs: env.TASK_BACKOFF_MS ?? 1000,
      providerTimeoutMs: env.PROVIDER_TIMEOUT_MS ?? 120000,
      modelConcurrencyCap: env.MODEL_CONCURRENCY_CAP ?? 100,
      // Crash recovery takes up to max(lockDurationMs, taskLeaseMs) + reconcileIntervalMs:
      // 30 s with these defaults.
      reconcileIntervalMs: env.RECONCILE_INTERVAL_MS ?? 10000,
      shutdownGraceMs: env.SHUTDOWN_GRACE_MS ?? 30000,
      lockDurationMs: env.QUEUE_LOCK_DURATION_MS ?? 20000,
      stalledIntervalMs: env.QUEUE_STALLED_INTERVAL_MS ?? 30000,
      taskLeaseMs: env.TASK_LEASE_MS ?? 15000,
      upstreamPollerCapacity: env.UPSTREAM_POLLER_CAPACITY ?? 10_000,
      upstreamLeaseMs: env.UPSTREAM_LEASE_MS ?? 30_000,
      economyTickMs: env.ECONOMY_TICK_MS ?? 1000,
      simulatedBatchHangAt: env.SIMULATED_BATCH_HANG_AT ?? null,
    },
    queue: {
      dispatchWindow: env.DISPATCH_WINDOW ?? 10,
      // Enough that the workers never run dry between two top-ups.
      depth: env.QUEUE_DEPTH ?? Math.max(20, 2 * concurrency),
      feedIntervalMs: env.QUEUE_FEED_INTERVAL_MS ?? 100,
    },
    upstream: {
      allowPrivate: env.UPSTREAM_ALLOW_PRIVATE ?? false,
      maxImageBytes: env.UPSTREAM_MAX_IMAGE_BYTES ?? 50 * 1024 * 1024,
    },
    webhooks: {
      secretKey: env.WEBHOOK_SECRET_KEY ? Buffer.from(env.WEBHOOK_SECRET_KEY, 'base64') : null,
      previousSecretKeys: (env.WEBHOOK_SECRET_KEY_PREVIOUS ?? '')
        .split(',')
        .map((k) => k.trim())
        .filter((k) => k.length > 0)
        .map((k) => Buffer.from(k, 'base64')),
      retryDelaysMs: (env.WEBHOOK_RETRY_DELAYS_MS ?? DEFAULT_WEBHOOK_RETRY_DELAYS_MS).split(',').map(Number),
      allowPrivate: env.WEBHOOK_ALLOW_PRIVATE ?? false,
      timeoutMs: env.WEBHOOK_TIMEOUT_MS ?? 10_000,
      pollIntervalMs: env.WEBHOOK_POLL_INTERVAL_MS ?? 500,
      maxInFlight: env.WEBHOOK_MAX_IN_FLIGHT ?? 50,
      endpointConcurrency: env.WEBHOOK_ENDPOINT_CONCURRENCY ?? 8,
      // Two endpoints' worth, a third of the default 50: three accounts whose endpoints all hang leave room for the rest.
      accountConcurrency: env.WEBHOOK_ACCOUNT_CONCURRENCY ?? 16,
      circuitFailures: env.WEBHOOK_CIRCUIT_FAILURES ?? 20,
      circuitCooldownMs: env.WEBHOOK_CIRCUIT_COOLDOWN_MS ?? 60_000,
    },
    providerApiKeys: providerApiKeys(raw),
    stripe: stripeConfig(env),
    logLevel: env.LOG_LEVEL ?? (env.NODE_ENV === 'test' ? 'silent' : 'info'),
    trustProxy: trustProxyOf(env.TRUST_PROXY),
    warnings: [...lookalikeWarnings(given), ...publicUrlWarnings(env, driver)],
  };
}

/** 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: about 28 hours from the first attempt to the last. */
const DEFAULT_WEBHOOK_RETRY_DELAYS_MS = '5000,300000,1800000,7200000,18000000,36000000,36000000';

const LOCAL_HOSTS = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/i;

/**
 * In production, links Kiln hands out (result and upload URLs, webhooks' payloads) must reach
 * clients on other machines: a default or loopback public URL is almost always a forgotten
 * setting, and every link would point at the client's own machine.
 */
function publicUrlWarnings(env: EnvSchema, driver: 'local' | 'minio'): string[] {
  if (env.NODE_ENV !== 'production') return [];
  const warnings: string[] = [];
  const check = (name: string, value: string | undefined, usedFor: string) => {
    if (value === undefined) {
      warnings.push(`${name} is not set: ${usedFor} default to a localhost URL that clients on other machines cannot reach`);
    } else if (LOCAL_HOSTS.test(new URL(value).hostname)) {
      warnings.push(`${name}=${value} points at localhost: ${usedFor} will not reach clients on other machines`);
    }
  };
  check('PUBLIC_BASE_URL', env.PUBLIC_BASE_URL, driver === 'local' ? "the api's links and file URLs" : "the api's links");
  if (driver === 'minio') check('MINIO_PUBLIC_URL', env.MINIO_PUBLIC_URL, 'image and upload URLs');
  return warnings;
}

/** TRUST_PROXY as Express's `trust proxy` setting takes it (validated by the schema). */
function trustProxyOf(value: string | undefined): boolean | number | string {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  return /^\d+$/.test(value) ? Number(value) : value;
}

function providerApiKeys(raw: Record<string, unknown>): Record<string, string> {
  const keys: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (isUpstreamKeyName(name) && typeof value === 'string' && value.length > 0) keys[name] = value;
  }
  return keys;
}

export interface StripeConfig {
  secretKey: string;
  webhookSecret: string;
  /** Where the SDK connects (host, port, protocol options); null: Stripe itself. */
  apiBase: { protocol: 'http' | 'https'; host: string; port: number } | null;
  /** Each call's timeout (the SDK's `timeout`, per attempt). */
  timeoutMs: number;
  /** Where Checkout sends the buyer back: the web app's page under /app/. */
  returnUrlBase: string;
}

function stripeConfig(env: EnvSchema): StripeConfig | null {
  if (!env.STRIPE_SECRET_KEY || !env.STRIPE_WEBHOOK_SECRET) return null;
  const base = env.STRIPE_API_BASE ? new URL(env.STRIPE_API_BASE) : null;
  const protocol = base?.protocol === 'http:' ? 'http' : 'https';
  return {
    secretKey: env.STRIPE_SECRET_KEY,
    webhookSecret: env.STRIPE_WEBHOOK_SECRET,
    apiBase: base && { protocol, host: base.hostname, port: base.port ? Number(base.port) : protocol === 'http' ? 80 : 443 },
    timeoutMs: env.STRIPE_TIMEOUT_MS ?? 10_000,
    returnUrlBase: `${(env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT ?? 8080}`).replace(/\/+$/, '')}/app/credits`,
  };
}
