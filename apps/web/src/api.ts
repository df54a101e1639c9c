/*
 * The one way the web app talks to Kiln: the documented /v1/dashboard routes, same origin.
 * The session is an HttpOnly cookie the page never sees; every request carries
 * X-Kiln-Session: cookie, which the api requires on cookie-authenticated writes (CSRF).
 * Every request has a timeout. Failures become ApiError with the interface's error code.
 */
import type { components } from '@app/sdk';

const BASE = '/v1/dashboard';
const DEFAULT_TIMEOUT_MS = 20_000;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

type SignedOutListener = (reason: string) => void;
let onSignedOut: SignedOutListener = () => {};
/** Called when the api says the session is gone (signed out elsewhere, expired, revoked). */
export function whenSignedOut(listener: SignedOutListener): void {
  onSignedOut = listener;
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Sign-in routes: a 401 there is a wrong password, not an ended session. */
  anonymous?: boolean;
}

/** The raw answer (status and headers matter for long polling); throws ApiError on failure statuses except 304. */
export async function request(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { 'X-Kiln-Session': 'cookie', Accept: 'application/json', ...opts.headers };
  let body: BodyInit | undefined;
  if (opts.body instanceof FormData) body = opts.body;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['Content-Type'] = 'application/json';
  }
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  let res: Response;
  try {
    res = await fetch(BASE + path, { method, headers, body, signal, credentials: 'same-origin', cache: 'no-store' });
  } catch (err) {
    if (opts.signal?.aborted) throw err;
    const timedOut = timeout.aborted;
    throw new ApiError(0, timedOut ? 'timeout' : 'network', timedOut ? 'Kiln did not answer in time.' : 'Kiln could not be reached.');
  }
  if (res.ok || res.status === 304) return res;
  const error = await readError(res);
  if (res.status === 401 && !opts.anonymous) onSignedOut(signedOutReason(error));
  throw error;
}

export async function api<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const res = await request(method, path, opts);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

/** Kiln's error object, or a proxy's JSON: a string `code` tells which before the rest is read. */
interface MaybeErrorBody {
  error?: { code?: unknown; message?: string; details?: Record<string, unknown> } | null;
}

async function readError(res: Response): Promise<ApiError> {
  try {
    const body = (await res.json()) as MaybeErrorBody | null;
    const e = body?.error;
    if (e && typeof e.code === 'string') return new ApiError(res.status, e.code, String(e.message ?? e.code), e.details ?? {});
  } catch {
    // Not Kiln's error object (a proxy's page): fall through.
  }
  if (res.status === 503) return new ApiError(503, 'service_unavailable', 'Kiln is unavailable right now.');
  return new ApiError(res.status, 'http_' + res.status, `Kiln answered ${res.status}.`);
}

function signedOutReason(error: ApiError): string {
  const reason = error.details.reason;
  if (reason === 'expired') return 'Your session expired. Sign in again.';
  if (reason === 'signed_out') return 'You were signed out. Sign in again.';
  // No cookie at all: a first visit, nothing to explain.
  return error.code === 'unauthorized' ? '' : 'Your session is no longer valid. Sign in again.';
}

/** A sentence for people, from an error (the api's message, or what to do about it). */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 503 || err.code === 'service_unavailable') return 'Kiln is temporarily unavailable (503). Try again in a moment.';
    if (err.code === 'rate_limited') return 'Too many requests. Wait a moment and try again.';
    return err.message;
  }
  return 'Something went wrong.';
}

// The wire shapes, from the OpenAPI document (the SDK's generated types: npm run sdk:types),
// so the app and the api cannot drift apart unnoticed: npm run typecheck checks both.
type Schemas = components['schemas'];
export type AccountInfo = Schemas['DashboardAccountResponseDto'];
export type Usage = Schemas['UsageResponseDto'];
export type Key = Schemas['KeyDto'];
export type Batch = Schemas['BatchDto'];
export type Task = Schemas['TaskDto'];
export type Model = Schemas['ModelDto'];
/** The document leaves `defaults` and `limits` open objects; their fields are docs/api.md#model-catalog's. */
export type Catalog = Omit<Schemas['CatalogResponseDto'], 'defaults' | 'limits'> & {
  defaults: { aspectRatio: string; resolution: string; countPerCombo: number; refMode: string; quality: string };
  limits: {
    countPerCombo: { min: number; max: number };
    maxPrompts: number;
    maxRefImages: number;
    upload: { maxBytes: number; maxFiles: number; types: string[] };
  };
};
export type Estimate = Schemas['BatchEstimateResponseDto'];
export type Endpoint = Schemas['WebhookEndpointDto'];
export type CreditPack = Schemas['CreditPackDto'];
export type CheckoutAnswer = Schemas['CheckoutResponseDto'];
export type LedgerEntry = Schemas['LedgerEntryDto'];
export type Delivery = Schemas['WebhookDeliveryDto'];

export const SCOPES = ['models:read', 'account:read', 'batches:read', 'batches:write', 'uploads:write', 'webhooks:manage'];

/**
 * Every event an endpoint may subscribe to, the spend alerts (credits.low, which the usage
 * page's low-credit alert sends, and key.budget.threshold) included; api.spec.ts keeps it
 * equal to the api's list.
 */
export const WEBHOOK_EVENTS: Array<Endpoint['events'][number]> = [
  'batch.completed',
  'task.succeeded',
  'task.failed',
  'credits.low',
  'key.budget.threshold',
  'ping',
];
