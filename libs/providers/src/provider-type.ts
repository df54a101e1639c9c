import type { PixelSize } from './image-size';
import type { BatchObjectStore, RouteBatchSettings, UpstreamBatchApi } from './upstream-batch';
import type { ImageProvider, ProviderError, RenderRequest, RenderResolution, RenderResult } from './render.types';
import type { PresetPrice, TypePricing } from './price-rule';

/**
 * What one provider type is, whole: everything Kiln needs to validate, build, watch,
 * document and test a route of that type. Each type lives in its own folder
 * (`libs/providers/src/<type>/`) and exports one of these; `provider-types.registry.ts` lists them, and
 * the catalog, route health, telemetry, the admin DTOs and OpenAPI read only from there.
 *
 * Adding a type is one folder and one line in `provider-types.registry.ts`; libs/testing's
 * provider-types.registry.spec.ts refuses an entry without a settings schema or presets, and
 * fake-upstreams.spec.ts a type that calls an upstream without a fake (its test double lives
 * in libs/testing/src/fakes/<type>/, never in production code).
 */
export type ProviderTypeDefinition<R extends RouteBase = RouteBase> = SyncProviderType<R> | QueueProviderType<R>;

/** Every route is a JSON object with a `type`; the rest are the type's settings. */
export interface RouteBase {
  type: string;
  /** The preset a route was expanded from, kept as a label only (a later preset change never alters the route). */
  preset?: string;
}

/** The settings every upstream (non-local) type shares. */
export interface UpstreamRouteSettings {
  baseUrl: string;
  model: string;
  /** Name of the environment variable holding the upstream key (default: the type's keyVariable). */
  apiKeyEnv?: string;
  timeoutMs?: number;
  /** Concurrent upstream calls for this model, across all generators (default MODEL_CONCURRENCY_CAP). */
  maxConcurrency?: number;
  /** Requests a minute the upstream allows, when it publishes one (route pacing). */
  ratePerMinute?: number;
}

interface ProviderTypeBase<R extends RouteBase> {
  /** The route's `type`, never renamed once deployed: it is stored in models and batch snapshots. */
  readonly type: R['type'];
  /** One line for GET /v1/admin/providers, OpenAPI and docs/providers.md. */
  readonly summary: string;
  /**
   * The route settings schema, in the order they are checked and documented. A route's
   * fields not listed here are kept as given (the catalog has always stored routes as sent).
   */
  readonly settings: readonly RouteSetting[];
  /**
   * The environment variable holding the upstream key when the route names none (`apiKeyEnv`),
   * null for types that call no upstream. The config lib reads it and its `<NAME>_FILE` form;
   * its name must be one the config recognises as an upstream key (provider-types.registry.spec checks).
   */
  readonly keyVariable: string | null;
  /**
   * Where the work happens: `local-cpu` renders take one of the generator's render slots
   * (kiln_render_* metrics); `upstream` calls wait on the model's concurrency limiter
   * (maxConcurrency, kiln_upstream_* metrics). simulated stands in for an upstream.
   */
  readonly work: 'local-cpu' | 'upstream';
  /** The `provider` label on kiln_tasks_*, kiln_upstream_* metrics for routes of this type. */
  readonly metricsLabel: string;
  /** Where a route sends its calls, for logs and health: never a key. */
  describe(route: R): string;
  /** The address the catalog egress-checks when an operator sets the route; null: none. */
  upstreamUrl(route: R): string | null;
  /** Known upstream models, as data with dates (they move fast). At least one per type. */
  readonly presets: readonly ProviderPreset[];
  /**
   * The size the route's upstream makes for Kiln's pixel size of a pair (api.md "Pixel
   * sizes"), by the same rule the type's request mapping sends: the catalog offers only the
   * pairs where it is honest (size-rules.ts isHonest). null: the upstream makes what is asked,
   * or the route's sizeMap names something Kiln cannot measure ("auto"), the operator's call.
   * Optional: a type without it makes every size.
   */
  sizeFor?(route: R, asked: SizeAsked): PixelSize | null;
  /**
   * The type's error classification (UpstreamErrorClassifier): how its upstream's failure
   * answers become ProviderErrors, content refusals (content_refused) included. The type's
   * provider applies it; it is listed here so each type's refusals are found in one place.
   */
  readonly classifyError?: UpstreamErrorClassifier;
  /**
   * Whether the upstream bills a request that ended in this failure (an upstream may bill its
   * validation refusals and the runs its safety checker refused, but not its own 5xx): the
   * task then records the route's cost
   * for the image it did not get. Absent: failures are never billed.
   */
  billsFailure?(err: ProviderError): boolean;
  /**
   * The type's price function (`<type>/<type>.price.ts`): the price rule kinds its upstream
   * bills by and how a rule prices what it made. A type that calls an upstream lists the
   * `price` setting (price-rule.ts priceSetting) too. Absent: a local type, whose images cost
   * nothing upstream.
   */
  readonly pricing?: TypePricing;
  /**
   * The type's batch API (economy tier, upstream-batch.ts), when its upstream has one: a
   * route of the type then takes the `batch` setting (listed in `settings` too). Absent: the
   * type's routes have no economy tier.
   */
  readonly batch?: BatchCapableType<R>;
}

/** A type whose upstream (or local renderer) answers the image in the same exchange: one `render` call. */
export interface SyncProviderType<R extends RouteBase> extends ProviderTypeBase<R> {
  readonly mode: 'sync';
  create(route: R, context: ProviderContext): ImageProvider;
}

/** A type whose upstream queues the work (a queue type): see QueueImageProvider. */
export interface QueueProviderType<R extends RouteBase> extends ProviderTypeBase<R> {
  readonly mode: 'queue';
  create(route: R, context: ProviderContext): QueueImageProvider;
  /**
   * The upstream has a cancel for an accepted request (its provider implements `cancel`): a
   * batch cancel asks it for the type's tasks already accepted there. Absent: those run on.
   */
  readonly cancelsUpstream?: true;
}

/**
 * What a type with a batch API adds to its definition: the `batch`
 * route setting (schema and check) and how its API is made for a route.
 */
export interface BatchCapableType<R> {
  /** The `batch` setting (route-settings.ts batchSetting()); the type also lists it in its `settings`, so validateRoute checks it. */
  readonly batchSetting: RouteSetting;
  createBatchApi(route: R, settings: RouteBatchSettings, context: ProviderContext): UpstreamBatchApi;
}

/** One ratio x resolution pair of the catalog and Kiln's exact pixel size for it. */
export interface SizeAsked extends PixelSize {
  aspectRatio: string;
  resolution: RenderResolution;
}

/**
 * What `create` gets: the route comes with its defaults applied (`withDefaults`), and the
 * key is already looked up (a route whose key is missing never reaches `create`: the factory
 * answers not_configured for it). The config lib is the only code that reads the environment.
 */
export interface ProviderContext {
  /** The upstream key (the value of the route's apiKeyEnv or the type's keyVariable); '' for local types. */
  apiKey: string;
  /** Upstream timeout when the route does not set its own (PROVIDER_TIMEOUT_MS). */
  timeoutMs: number;
  /** UPSTREAM_ALLOW_PRIVATE and UPSTREAM_MAX_IMAGE_BYTES. */
  upstream: { allowPrivate: boolean; maxImageBytes: number };
  /** Only for tests: makes simulated routes deterministic. */
  random?: () => number;
  /** Where a local batch API keeps its state (the simulated type's; upstream-batch.ts BatchObjectStore). */
  batchObjects?: BatchObjectStore;
  /**
   * Test-only, inert unless set (SIMULATED_BATCH_HANG_AT, docs/operations.md): the simulated
   * batch API hangs for good at this step, once per group, so a test can SIGKILL a generator there.
   */
  simulatedBatchHangAt?: string | null;
}

/** One setting of a route type: its schema entry, its check and its documentation. */
export interface RouteSetting {
  name: string;
  /** Absent and required: the check is called with undefined and names the reason. */
  required: boolean;
  /** Applied by `withDefaults` (and shown in GET /v1/admin/providers) when the route omits it. */
  default?: unknown;
  description: string;
  /** null when the value is acceptable, else the reason (invalid_request `reason`, field `provider.<name>`). */
  check(value: unknown): string | null;
}

/**
 * A known upstream model for a type. The id is `<type>/<upstream model id>`; `settings` are
 * the route settings it expands to (type excluded). Stored routes are expanded copies, so
 * changing a preset here never changes a model already routed with it.
 */
export interface ProviderPreset {
  id: string;
  type: string;
  settings: Record<string, unknown>;
  /**
   * The upstream's published price as a rule in the vendor's own units, with the day it was
   * read, its source and the figures that could not be confirmed (price-rule.ts); a route by
   * the preset takes the rule as its `price` setting.
   */
  cost?: PresetPrice;
  /** ISO date the upstream announced it stops serving the model. */
  retiresAt?: string;
  notes?: string;
  /** What a model created `fromPreset` takes: the pairs it can honestly make, caps and supports. */
  model: {
    resolutionsByRatio: Record<string, RenderResolution[]>;
    maxRefImages: number | null;
    supportsRefImages: boolean;
    supportsQuality: boolean;
    supportsBackground: boolean;
  };
}

/** Thrown by route validation: the catalog answers invalid_request with this field (e.g. `provider.baseUrl`) and reason. */
export class RouteSettingsError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`Invalid ${field}: ${reason}`);
    this.name = 'RouteSettingsError';
  }
}

/**
 * A queue-style upstream (a queue type's): the work is submitted, then waited for, then
 * fetched. The split exists so Kiln never pays twice (spec section 2):
 *
 * 1. `submit` sends the request and resolves as soon as the upstream accepted it. The caller
 *    writes the returned `UpstreamSubmission` to PostgreSQL (through libs/tasks) BEFORE it
 *    waits on it; a crash after that point resumes the same submission, never submits again.
 * 2. `poll` asks once how the request is doing and returns at once: it never waits for the
 *    result. The caller decides when to ask again (`pollIntervalMs`), holding no worker slot
 *    in between, so thousands of tasks may wait at once.
 * 3. `fetchResult` downloads the finished image (through libs/egress, like every upstream
 *    byte) and says what it really is.
 *
 * Failures are ProviderErrors, as for `ImageProvider.render`: `retryable` says whether a new
 * attempt is worth it; an upstream's own failure answer (status failed) starts a new submit,
 * Kiln's own trouble (network to the upstream, storage, database) resumes the submission.
 * A content refusal is a ProviderError of kind `content_refused`.
 */
export interface QueueImageProvider {
  /** How long to wait between two polls of one request (the route's setting, or the type's default). */
  readonly pollIntervalMs: number;
  /**
   * The longest a request may wait upstream; past it the task fails (never resubmitted: the
   * upstream may still bill it). Every queue type has it.
   */
  readonly maxWaitMs: number;
  /** Sends the request once. Everything needed to resume it later is in the answer. */
  submit(req: RenderRequest): Promise<UpstreamSubmission>;
  /** One status check, answered at once. */
  poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll>;
  /**
   * The finished image; call only after `poll` answered `done`, with what it answered (the
   * queue types read the result's image URL while polling, where the request's own failure
   * answer is told apart from passing trouble).
   */
  fetchResult(
    submission: UpstreamSubmission,
    req: Pick<RenderRequest, 'signal' | 'onProgress'>,
    done: Extract<UpstreamPoll, { state: 'done' }>,
  ): Promise<RenderResult>;
  /**
   * Asks the upstream, once, to cancel an accepted request (types with `cancelsUpstream`
   * only), and says what it answered. Never throws for the upstream's answers or trouble.
   */
  cancel?(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamCancel>;
  /**
   * What would find this render's request again upstream (stored with the intent to submit,
   * before the call); `{}` for a type without `findSubmitted`.
   */
  submitKey(req: RenderRequest): Record<string, unknown>;
  /**
   * Looks upstream for a request submitted with `key` no earlier than `since` (an intent to
   * submit a crash left without its answer), for the types whose upstream lets a request be
   * found again. Throws a ProviderError when the upstream cannot be asked now (the attempt
   * is retried, the intent kept). Absent: the route's `onUnknownSubmit` decides.
   */
  findSubmitted?(key: Record<string, unknown>, since: Date, signal?: AbortSignal): Promise<SubmitLookup>;
  /** The route's `onUnknownSubmit`: what a submit in doubt that cannot be looked up becomes. */
  readonly onUnknownSubmit: UnknownSubmitPolicy;
}

/**
 * A queue route's choice for a submit in doubt that its upstream gives no way to find again:
 * `resubmit` (an image for the task, the upstream perhaps paid twice) or `fail` (the task
 * failed and refunded, the upstream perhaps paid for an image nobody gets).
 */
export type UnknownSubmitPolicy = 'resubmit' | 'fail';

/**
 * A lookup's answer: `found` the upstream has the request (resumed, never submitted again);
 * `absent` it was looked for where it would be and is not there (submitted anew, safely);
 * `unknown` the look could not cover the window (the route's `onUnknownSubmit` decides).
 */
export type SubmitLookup = { state: 'found'; submission: UpstreamSubmission } | { state: 'absent' } | { state: 'unknown'; detail: string };

/**
 * A cancel's answer: `cancelled` the upstream confirms the request did not run and will not
 * (nothing billed); `runs` it ran, runs, or finished, and is billed; `busy` the upstream asked
 * to be asked again later (429; the cancel was not taken); `unknown` no answer that tells
 * (a timeout, a 5xx, the network): the request may still run, its poll says how it ended.
 */
export type UpstreamCancel =
  { outcome: 'cancelled' | 'runs' | 'unknown'; detail: string } | { outcome: 'busy'; detail: string; retryAfterMs?: number };

/** What is persisted for a submitted request: plain JSON, so it survives in a jsonb column. */
export interface UpstreamSubmission {
  /** The upstream's own id for the request (shown to operators). */
  requestId: string;
  /** URLs or anything else the upstream answered that later calls need (status_url, polling_url, urls.get, ...). */
  state: Record<string, string>;
}

/**
 * One poll's answer. The queue types answer passing trouble of the poll itself (429, 5xx, a
 * timeout) as `waiting` (with the upstream's Retry-After), and the request's own failure
 * answer as `failed`, so the poller never mistakes one for the other: a retryable `failed`
 * starts a new submit (a new attempt), a non-retryable one (a content refusal) fails the task.
 */
export type UpstreamPoll =
  | {
      state: 'waiting';
      /** Coarse progress 0-100 when the upstream says. */ progressPct?: number;
      /** The upstream's own status word. */ upstreamStatus?: string;
      /** Poll no sooner than this (the upstream's Retry-After on a 429). */ retryAfterMs?: number;
    }
  | {
      state: 'done';
      /** Where the made image is, when the poll already read it. */ resultUrl?: string;
      /** The run time the upstream reports, in seconds (what a per-second price bills). */ runSeconds?: number;
    }
  | { state: 'failed'; error: ProviderError };

/** Whether a provider built for a route runs through submit/poll/fetch. */
export function isQueueProvider(provider: unknown): provider is QueueImageProvider {
  return (
    typeof provider === 'object' &&
    provider !== null &&
    typeof (provider as QueueImageProvider).submit === 'function' &&
    typeof (provider as QueueImageProvider).poll === 'function'
  );
}

/** An upstream answer, as a type's error classification sees it. */
export interface UpstreamAnswer {
  status: number;
  headers: Headers;
  /** The body as text (JSON for every upstream Kiln knows). */
  text: string;
}

/**
 * A type's error classification: an upstream answer that is not a success -> the ProviderError
 * the generator acts on (retry, wait Retry-After, fail with content_refused, ...). Each type
 * has its own in its folder (e.g. openai/openai.errors.ts), since each says "refused"
 * differently.
 */
export type UpstreamErrorClassifier = (answer: UpstreamAnswer, secrets: { apiKey: string }) => ProviderError;
