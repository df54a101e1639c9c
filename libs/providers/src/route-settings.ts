import type { ProviderContext, RouteSetting } from './provider-type';
import { MAX_ROUTE_CONCURRENCY } from './render.types';
import { BATCH_DEFAULTS } from './upstream-batch';

/**
 * The checks route settings share, each answering null or the invalid_request reason the
 * catalog has always given for it (reasons are part of the admin API: never rename one).
 */
export const checks = {
  url: (v: unknown) => (typeof v === 'string' && /^https?:\/\/\S+$/.test(v) ? null : 'not_a_url'),
  nonEmptyString: (v: unknown) => (typeof v === 'string' && v.length > 0 ? null : 'required'),
  envName: (v: unknown) => (typeof v === 'string' && /^[A-Z][A-Z0-9_]*$/.test(v) ? null : 'invalid'),
  positiveInteger: (v: unknown) => (Number.isInteger(v) && (v as number) >= 1 ? null : 'invalid'),
  concurrency: (v: unknown) =>
    Number.isInteger(v) && (v as number) >= 1 && (v as number) <= MAX_ROUTE_CONCURRENCY ? null : 'out_of_range',
  rate: (v: unknown) => (typeof v === 'number' && v >= 0 && v <= 1 ? null : 'out_of_range'),
  /** Kiln "WxH" -> upstream size string. */
  sizeMap: (v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((s) => typeof s === 'string') ? null : 'invalid',
};

/**
 * What every upstream type's provider (and batch API) is built with besides its own route
 * settings: the key, the route's timeoutMs else the context's (PROVIDER_TIMEOUT_MS), and the
 * upstream limits.
 */
export function upstreamDeps(
  route: { timeoutMs?: number },
  context: ProviderContext,
): { apiKey: string; timeoutMs: number; allowPrivate: boolean; maxImageBytes: number } {
  return {
    apiKey: context.apiKey,
    timeoutMs: route.timeoutMs ?? context.timeoutMs,
    allowPrivate: context.upstream.allowPrivate,
    maxImageBytes: context.upstream.maxImageBytes,
  };
}

/** baseUrl, model, apiKeyEnv, timeoutMs, maxConcurrency: what every upstream type takes (spec 1). */
export function upstreamSettings(opts: { defaultBaseUrl?: string; keyVariable: string; modelExample: string }): {
  baseUrl: RouteSetting;
  model: RouteSetting;
  apiKeyEnv: RouteSetting;
  timeoutMs: RouteSetting;
  maxConcurrency: RouteSetting;
  ratePerMinute: RouteSetting;
} {
  return {
    baseUrl: {
      name: 'baseUrl',
      required: opts.defaultBaseUrl === undefined,
      ...(opts.defaultBaseUrl !== undefined ? { default: opts.defaultBaseUrl } : {}),
      description: 'The upstream API root; https and a public address unless UPSTREAM_ALLOW_PRIVATE=true',
      check: checks.url,
    },
    model: { name: 'model', required: true, description: `The upstream model id, e.g. ${opts.modelExample}`, check: checks.nonEmptyString },
    apiKeyEnv: {
      name: 'apiKeyEnv',
      required: false,
      default: opts.keyVariable,
      description: `The environment variable holding the upstream key (or its <NAME>_FILE form) on the generators`,
      check: checks.envName,
    },
    timeoutMs: {
      name: 'timeoutMs',
      required: false,
      description: 'Budget for one upstream call in ms (default PROVIDER_TIMEOUT_MS)',
      check: checks.positiveInteger,
    },
    maxConcurrency: {
      name: 'maxConcurrency',
      required: false,
      description: 'Concurrent upstream calls for the model across all generators (default MODEL_CONCURRENCY_CAP)',
      check: checks.concurrency,
    },
    ratePerMinute: {
      name: 'ratePerMinute',
      required: false,
      description:
        'Requests a minute the upstream allows the key, when it publishes one: every generator together starts no more (the pacing learns the rest from 429s and rate-limit headers)',
      check: checks.positiveInteger,
    },
  };
}

const BATCH_FIELDS = ['enabled', 'collectMs', 'maxRequests', 'pollIntervalMs'] as const;

/**
 * The route setting `batch` of a type with a batch API: `{ enabled, collectMs?, maxRequests?,
 * pollIntervalMs? }` (BATCH_DEFAULTS for the optional ones), plus `delayMs` for the simulated
 * type. Reasons: `invalid` (not an object, `enabled` not a boolean, a number out of range) or
 * `unknown_key`.
 */
export function batchSetting(opts: { delayMs?: boolean } = {}): RouteSetting {
  const fields: readonly string[] = opts.delayMs ? [...BATCH_FIELDS, 'delayMs'] : BATCH_FIELDS;
  return {
    name: 'batch',
    required: false,
    description:
      `Economy tier through the upstream's batch API: { "enabled": true, "collectMs": ${BATCH_DEFAULTS.collectMs}, "maxRequests": ${BATCH_DEFAULTS.maxRequests}, "pollIntervalMs": ${BATCH_DEFAULTS.pollIntervalMs}` +
      (opts.delayMs ? ', "delayMs": 0 }' : ' }') +
      ' (the optional ones default to those values)',
    check: (v) => {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return 'invalid';
      const b = v as Record<string, unknown>;
      if (Object.keys(b).some((k) => !fields.includes(k))) return 'unknown_key';
      if (typeof b.enabled !== 'boolean') return 'invalid';
      const int = (x: unknown, min: number, max: number): boolean =>
        x === undefined || (Number.isInteger(x) && (x as number) >= min && (x as number) <= max);
      if (!int(b.collectMs, 0, 86_400_000) || !int(b.maxRequests, 1, 1_000_000) || !int(b.pollIntervalMs, 100, 86_400_000))
        return 'invalid';
      if (!int(b.delayMs, 0, 86_400_000)) return 'invalid';
      return null;
    },
  };
}
