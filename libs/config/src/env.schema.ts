import { plainToInstance, Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsNumber, IsOptional, IsString, IsUrl, Matches, Max, Min, MinLength, validateSync } from 'class-validator';
import { UPSTREAM_KEY_VARIABLES } from '@app/providers';

const TRUST_PROXY_ITEM = String.raw`(?:loopback|linklocal|uniquelocal|[0-9a-fA-F:.]+(?:/\d{1,3})?)`;
const TRUST_PROXY_PATTERN = new RegExp(String.raw`^(?:true|false|\d+|${TRUST_PROXY_ITEM}(?:\s*,\s*${TRUST_PROXY_ITEM})*)$`);

const WEBHOOK_KEY = String.raw`[A-Za-z0-9+/]{43}=`;
const WEBHOOK_KEY_PATTERN = new RegExp(`^${WEBHOOK_KEY}$`);
const WEBHOOK_KEY_LIST_PATTERN = new RegExp(`^${WEBHOOK_KEY}(\\s*,\\s*${WEBHOOK_KEY})*$`);

const toInt = ({ value }: { value: unknown }) => (value === undefined || value === '' ? undefined : Number(value));
const TRUE_WORDS = ['1', 'true', 'yes', 'on'];
const FALSE_WORDS = ['0', 'false', 'no', 'off'];
/** Anything but a yes/no word stays a string, so IsBoolean refuses it instead of reading it as false. */
const toBool = ({ value }: { value: unknown }) => {
  if (value === undefined || value === '') return undefined;
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- an environment value is text, never an object
  const word = String(value).toLowerCase();
  if (TRUE_WORDS.includes(word)) return true;
  return FALSE_WORDS.includes(word) ? false : value;
};
const emptyToUndefined = ({ value }: { value: unknown }) => (value === '' ? undefined : value);

/** Every environment variable Kiln reads. Nothing else in the code reads process.env. */
export class EnvSchema {
  @IsOptional()
  @IsIn(['development', 'production', 'test'])
  NODE_ENV?: string;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(65535)
  PORT?: number;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsUrl({ require_tld: false, protocols: ['http', 'https'] })
  PUBLIC_BASE_URL?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  DATABASE_URL?: string;

  /** The built web app served at /app/ (default dist/web, relative to the working directory). */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  WEB_APP_DIR?: string;

  /** node-postgres connections each process (api, generator) may open. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  DATABASE_POOL_SIZE?: number;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  REDIS_URL?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  REDIS_PREFIX?: string;

  /** How long any single Redis command may take before it fails (the caller then falls back or refuses). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(50)
  @Max(60000)
  REDIS_COMMAND_TIMEOUT_MS?: number;

  /** Failed credentials (API keys, admin tokens, session tokens) one client address may send per minute before 429. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100000)
  AUTH_FAILURES_PER_IP_PER_MINUTE?: number;

  /** Requests per minute one dashboard session may make. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100000)
  DASHBOARD_REQUESTS_PER_MINUTE?: number;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  @MinLength(16)
  ADMIN_TOKEN?: string;

  /** What one credit is worth in USD, for the operator's usage report (revenue and margin). */
  @Transform(toInt)
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  @Max(1000)
  CREDIT_VALUE_USD?: number;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsIn(['local', 'minio'])
  STORAGE_DRIVER?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  DATA_DIR?: string;

  /** Where upload requests' files wait while they are handled (default `<DATA_DIR>/incoming`); a tmpfs in containers. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  UPLOAD_TMP_DIR?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  MINIO_ENDPOINT?: string;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(65535)
  MINIO_PORT?: number;

  @Transform(toBool)
  @IsOptional()
  @IsBoolean()
  MINIO_USE_SSL?: boolean;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  MINIO_ACCESS_KEY?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  MINIO_SECRET_KEY?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsString()
  MINIO_BUCKET?: string;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsUrl({ require_tld: false, protocols: ['http', 'https'] })
  MINIO_PUBLIC_URL?: string;

  /** Longest an object store call may go without a byte either way; then it fails. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(600_000)
  MINIO_TIMEOUT_MS?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(3650)
  RETENTION_DAYS?: number;

  /** Batch archives one api process streams at once; past it GET .../archive answers 503 with Retry-After. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  ARCHIVE_MAX_CONCURRENT?: number;

  /** Batch archives one account may stream at once from one api process; past it 429 with Retry-After. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  ARCHIVE_MAX_PER_ACCOUNT?: number;

  /** Result and preview objects no row references (left by a crash) are removed once this old. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(0)
  ORPHAN_GRACE_MS?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  GENERATOR_CONCURRENCY?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(64)
  RENDER_CONCURRENCY?: number;

  /** The generator's HTTP listener for /healthz and /readyz (0 or unset: none). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(65535)
  GENERATOR_HEALTH_PORT?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(20)
  TASK_MAX_ATTEMPTS?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  TASK_BACKOFF_MS?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  PROVIDER_TIMEOUT_MS?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  MODEL_CONCURRENCY_CAP?: number;

  /** How often one generator hands back tasks whose job was lost or whose worker died. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1000)
  RECONCILE_INTERVAL_MS?: number;

  /** A new batch's first tasks, enqueued by the api at once (all of them while the queue is below QUEUE_DEPTH); the rest wait in PostgreSQL for the feeder. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10000)
  DISPATCH_WINDOW?: number;

  /** Jobs each generator keeps waiting in the queue, fed from the pending tasks in fair order; the api enqueues a new batch whole below it. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100000)
  QUEUE_DEPTH?: number;

  /** How often each generator tops the queue up (it also does when its workers run it low). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(10)
  @Max(60000)
  QUEUE_FEED_INTERVAL_MS?: number;

  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1000)
  SHUTDOWN_GRACE_MS?: number;

  /** Bull lock on an active job; a worker that stops renewing it (killed) loses the job after this, and the reconciler hands its task back. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(200)
  QUEUE_LOCK_DURATION_MS?: number;

  /** How often a generator looks for jobs whose worker died (Bull stalled-job recovery). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  QUEUE_STALLED_INTERVAL_MS?: number;

  /** A `running` task untouched this long, with no live job (or one whose lock expired), is re-enqueued by the reconciler. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(500)
  TASK_LEASE_MS?: number;

  /** Most tasks waiting on queue upstreams (the queue types') one generator's poller holds in memory; the rest wait in PostgreSQL. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  UPSTREAM_POLLER_CAPACITY?: number;

  /** A poller's hold on its waiting tasks, renewed while it lives; past it, another generator's poller takes them over. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(500)
  UPSTREAM_LEASE_MS?: number;

  /** How often a generator's economy collector looks for waiting economy tasks and due upstream batches (ms). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(50)
  @Max(600_000)
  ECONOMY_TICK_MS?: number;

  /**
   * Test-only, inert unless set: the simulated batch API hangs for good at this step (once per
   * group), so crash tests can SIGKILL a generator there (docs/operations.md).
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsIn(['before-upload', 'after-upload', 'after-create', 'poll', 'mid-results'])
  SIMULATED_BATCH_HANG_AT?: string;

  /** Longest a client may take to send a whole request, headers and body (Node's default is 300 s). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  HTTP_REQUEST_TIMEOUT_MS?: number;

  /** Credits a web app sign-up starts with (a `grant` ledger row); 0, the default: none. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1_000_000_000)
  SIGNUP_CREDITS?: number;

  /** The plan a web app sign-up gets (a plan key, checked at sign-up); default free. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^[a-z][a-z0-9_-]{0,31}$/)
  SIGNUP_PLAN?: string;

  /** How long POST /v1/images/generations and /edits wait for their batch before answering generation_timeout. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1000)
  @Max(3_600_000)
  OPENAI_COMPAT_WAIT_MS?: number;

  /** Longest a client may take to send a request's headers (at most HTTP_REQUEST_TIMEOUT_MS). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  HTTP_HEADERS_TIMEOUT_MS?: number;

  /** Open connections one client address may hold; more are closed at once. 0: no cap. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  MAX_CONNECTIONS_PER_IP?: number;

  /** How long a process waits for a new PostgreSQL connection before the request fails (503). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(600_000)
  DATABASE_CONNECT_TIMEOUT_MS?: number;

  /** Longest one SQL statement may take: PostgreSQL cancels it (and the client gives up soon after on a server that does not answer). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  DATABASE_QUERY_TIMEOUT_MS?: number;

  /**
   * false behind a transaction-mode pooler without protocol-level prepared statements
   * (PgBouncer before 1.21): statements run unnamed and connections carry no session settings.
   */
  @Transform(toBool)
  @IsOptional()
  @IsBoolean()
  DATABASE_PREPARED_STATEMENTS?: boolean;

  /** Lets model routes (and their result URLs, same origin only) use plain http and non-public addresses. */
  @Transform(toBool)
  @IsOptional()
  @IsBoolean()
  UPSTREAM_ALLOW_PRIVATE?: boolean;

  /** The largest image Kiln downloads from an upstream (its base64 JSON answer may be 4/3 of it). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1024)
  @Max(1024 * 1024 * 1024)
  UPSTREAM_MAX_IMAGE_BYTES?: number;

  /** Encrypts webhook signing secrets at rest (AES-256-GCM): base64 of exactly 32 random bytes. Unset: endpoints cannot be created. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(WEBHOOK_KEY_PATTERN, { message: 'WEBHOOK_SECRET_KEY must be base64 of 32 bytes (openssl rand -base64 32)' })
  WEBHOOK_SECRET_KEY?: string;

  /** Earlier WEBHOOK_SECRET_KEY values, comma-separated: still decrypt; each generator re-encrypts with the current key at boot. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(WEBHOOK_KEY_LIST_PATTERN, { message: 'WEBHOOK_SECRET_KEY_PREVIOUS must be comma-separated base64 of 32 bytes each' })
  WEBHOOK_SECRET_KEY_PREVIOUS?: string;

  /** Delays before each retry of a failed delivery, comma-separated milliseconds; after the last, the delivery is failed. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^\d{1,10}(,\d{1,10}){0,19}$/, { message: 'WEBHOOK_RETRY_DELAYS_MS must be 1 to 20 comma-separated millisecond counts' })
  WEBHOOK_RETRY_DELAYS_MS?: string;

  /** Lets webhook endpoints use plain http and non-public addresses: development and tests only. */
  @Transform(toBool)
  @IsOptional()
  @IsBoolean()
  WEBHOOK_ALLOW_PRIVATE?: boolean;

  /** The longest one delivery attempt may take (the contract says 10 s; lower it in tests only). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(60000)
  WEBHOOK_TIMEOUT_MS?: number;

  /** How often each generator looks for due webhook deliveries when it found none. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(10)
  @Max(60000)
  WEBHOOK_POLL_INTERVAL_MS?: number;

  /** Attempts one generator keeps in flight at once, all endpoints together. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  WEBHOOK_MAX_IN_FLIGHT?: number;

  /** Attempts one generator keeps in flight to any one endpoint, so a slow endpoint holds only these. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  WEBHOOK_ENDPOINT_CONCURRENCY?: number;

  /**
   * Attempts one generator keeps in flight to one account's endpoints together (at most
   * WEBHOOK_MAX_IN_FLIGHT), so one account's endpoints that never answer leave the other slots to the others.
   */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  WEBHOOK_ACCOUNT_CONCURRENCY?: number;

  /** Failed attempts in a row after which an endpoint's circuit opens (senders leave it alone for a while). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100000)
  WEBHOOK_CIRCUIT_FAILURES?: number;

  /** How long an open circuit first stays open; doubled after each failed probe, up to an hour. */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(3600000)
  WEBHOOK_CIRCUIT_COOLDOWN_MS?: number;

  @Transform(emptyToUndefined)
  @IsOptional()
  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  LOG_LEVEL?: string;

  /**
   * Which proxies in front of the api to believe about the client's address (X-Forwarded-For),
   * as Express's `trust proxy`: `true`, a hop count, or a comma-separated list of addresses,
   * subnets and the names loopback, linklocal, uniquelocal. Unset: none.
   */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(TRUST_PROXY_PATTERN, {
    message:
      'TRUST_PROXY must be true, false, a hop count, or a comma-separated list of addresses, subnets, loopback, linklocal, uniquelocal',
  })
  TRUST_PROXY?: string;

  /** Stripe's secret (or restricted) API key: turns selling credits on (docs/billing.md). Unset: its routes answer 404. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^(sk|rk)_(test|live)_[A-Za-z0-9_]+$/, {
    message: 'STRIPE_SECRET_KEY must be a Stripe secret or restricted key (sk_live_..., sk_test_..., rk_...)',
  })
  STRIPE_SECRET_KEY?: string;

  /** The signing secret of the Stripe webhook endpoint that calls POST /v1/stripe/webhook. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @Matches(/^whsec_[A-Za-z0-9+/=_-]+$/, { message: 'STRIPE_WEBHOOK_SECRET must be a Stripe webhook signing secret (whsec_...)' })
  STRIPE_WEBHOOK_SECRET?: string;

  /** Where the Stripe SDK sends its calls instead of https://api.stripe.com: tests and Stripe's own mock servers. */
  @Transform(emptyToUndefined)
  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  STRIPE_API_BASE?: string;

  /** Longest one call to Stripe may take (each attempt; one retry, with the same idempotency key). */
  @Transform(toInt)
  @IsOptional()
  @IsInt()
  @Min(100)
  @Max(60000)
  STRIPE_TIMEOUT_MS?: number;
}

/**
 * Whether a variable holds an upstream key a provider route may name (`apiKeyEnv`): every
 * `*_API_KEY` and `*_API_TOKEN`, and every provider type's own key variable whatever its form
 * (UPSTREAM_KEY_VARIABLES: each type declares its own, this lib names none). Kiln's own
 * secrets (MINIO_SECRET_KEY, ...) never count, so no route can send one upstream
 * (libs/testing/src/provider-types.registry.spec.ts checks each type's keyVariable).
 */
export function isUpstreamKeyName(name: string): boolean {
  if (SECRET_VARIABLES.includes(name)) return false;
  return /^[A-Z][A-Z0-9_]*_(API_KEY|API_TOKEN)$/.test(name) || UPSTREAM_KEY_VARIABLES.includes(name);
}

/**
 * Variables that may instead be read from a file named by `<NAME>_FILE` (Docker and Compose
 * secrets), besides every upstream key (isUpstreamKeyName).
 */
export const SECRET_VARIABLES = [
  'ADMIN_TOKEN',
  'DATABASE_URL',
  'REDIS_URL',
  'MINIO_ACCESS_KEY',
  'MINIO_SECRET_KEY',
  'WEBHOOK_SECRET_KEY',
  'WEBHOOK_SECRET_KEY_PREVIOUS',
  'STRIPE_SECRET_KEY',
  'STRIPE_WEBHOOK_SECRET',
];

/** One thing wrong with the environment: the variable, the value as given, and the rule it breaks. */
export interface ConfigProblem {
  variable: string;
  /** As given in the environment (undefined: not set). */
  value?: string;
  rule: string;
}

/**
 * Every configuration problem found at boot, in one message: one line per problem naming the
 * variable, its value as given and the rule. Boot logs it without a stack trace.
 */
export class ConfigurationError extends Error {
  constructor(readonly problems: ConfigProblem[]) {
    super(`Invalid Kiln configuration:\n${problems.map(formatProblem).join('\n')}`);
    this.name = 'ConfigurationError';
  }
}

export function formatProblem(p: ConfigProblem): string {
  return `  ${p.variable}${p.value === undefined ? '' : `=${JSON.stringify(p.value)}`}: ${p.rule}`;
}

/**
 * The environment with each `<NAME>_FILE` replaced by `<NAME>` set to that file's content (one
 * trailing newline dropped). Setting both is refused, as is a file that cannot be read.
 */
export function resolveSecretFiles(
  raw: Record<string, unknown>,
  readFile: (file: string) => string,
  collected?: ConfigProblem[],
): Record<string, unknown> {
  const resolved: Record<string, unknown> = { ...raw };
  const problems = collected ?? [];
  for (const [fileVar, file] of Object.entries(raw)) {
    if (!fileVar.endsWith('_FILE') || typeof file !== 'string' || file === '') continue;
    const name = fileVar.slice(0, -'_FILE'.length);
    if (!SECRET_VARIABLES.includes(name) && !isUpstreamKeyName(name)) continue;
    if (raw[name] !== undefined && raw[name] !== '') {
      problems.push({ variable: fileVar, rule: `${name} is set too; set only one of them` });
      continue;
    }
    try {
      resolved[name] = readFile(file).replace(/\r?\n$/, '');
    } catch (err) {
      problems.push({
        variable: fileVar,
        value: file,
        rule: `cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      });
    }
    delete resolved[fileVar];
  }
  if (!collected && problems.length > 0) throw new ConfigurationError(problems);
  return resolved;
}

/**
 * Validates the environment once. Each wrong variable is one problem with its value as given
 * (not as converted: `PORT=abc` is "abc", not NaN) and the first rule it breaks in the order
 * the schema declares them (a type before its range), so one mistake reads as one message.
 */
export function validateEnv(raw: Record<string, unknown>, problems?: ConfigProblem[]): EnvSchema {
  const env = plainToInstance(EnvSchema, raw, { enableImplicitConversion: false });
  const errors = validateSync(env, { skipMissingProperties: false, whitelist: false });
  const found: ConfigProblem[] = errors.map((e) => {
    // class-validator lists constraints from the last decorator to the first.
    const rules = Object.values(e.constraints ?? {}).reverse();
    const given = raw[e.property];
    return {
      variable: e.property,
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- an environment value is text, never an object
      value: given === undefined ? undefined : String(given),
      rule: (rules[0] ?? 'is not valid').replace(new RegExp(`^${e.property} `), ''),
    };
  });
  if (problems) problems.push(...found);
  else if (found.length > 0) throw new ConfigurationError(found);
  return env;
}
