import { RouteSettingsError } from './provider-type';

/**
 * Failover over a model's chain of routes (docs/providers.md "A chain of routes"): which
 * failures of an attempt move the task's next attempt to the next route, and each route's
 * circuit. Stored on the model (null: these defaults) and snapshotted on each batch.
 */

/** The kinds of attempt failures that may fail over; refusals, validation errors and sizes never do. */
export const FAILOVER_KINDS = ['server_error', 'rate_limited', 'timeout', 'connection'] as const;
export type FailoverKind = (typeof FAILOVER_KINDS)[number];

/** The most routes a chain may have. */
export const MAX_ROUTES = 5;

export interface FailoverSettings {
  /** Failure kinds that move a task's next attempt to the next route. */
  on: FailoverKind[];
  /** How long an open circuit keeps tasks away from its route before one probe. */
  cooldownMs: number;
  /** Failures in a row (of the `on` kinds) that open a route's circuit. */
  failuresToOpen: number;
  /** 'all': a pair is offered when every route makes it; 'primary': when the first does (fallbacks that cannot are skipped). */
  sizes: 'all' | 'primary';
}

export const FAILOVER_DEFAULTS: FailoverSettings = Object.freeze({
  on: [...FAILOVER_KINDS],
  cooldownMs: 60_000,
  failuresToOpen: 5,
  sizes: 'all',
});

const COOLDOWN_MS = { min: 1000, max: 3_600_000 };
const FAILURES_TO_OPEN = { min: 1, max: 1000 };
const FIELDS = ['on', 'cooldownMs', 'failuresToOpen', 'sizes'];

/** The settings in force: the stored ones over the defaults (a model or batch row's null is the defaults). */
export function failoverOf(stored: Partial<FailoverSettings> | null | undefined): FailoverSettings {
  return { ...FAILOVER_DEFAULTS, ...(stored ?? {}), on: [...(stored?.on ?? FAILOVER_DEFAULTS.on)] };
}

/**
 * An operator's `failover` edit over the current settings; throws a RouteSettingsError naming
 * `failover.<setting>` and why (unknown_key, invalid, out_of_range, unknown_kind).
 */
export function mergeFailover(current: Partial<FailoverSettings> | null, edit: unknown): FailoverSettings {
  if (!edit || typeof edit !== 'object' || Array.isArray(edit)) throw new RouteSettingsError('failover', 'not_an_object');
  const e = edit as Record<string, unknown>;
  const unknown = Object.keys(e).find((k) => !FIELDS.includes(k));
  if (unknown) throw new RouteSettingsError(`failover.${unknown}`, 'unknown_key');
  if (e.on !== undefined) {
    if (!Array.isArray(e.on)) throw new RouteSettingsError('failover.on', 'invalid');
    const bad = e.on.findIndex((k) => !(FAILOVER_KINDS as readonly unknown[]).includes(k));
    if (bad !== -1) throw new RouteSettingsError(`failover.on[${bad}]`, 'unknown_kind');
  }
  const int = (v: unknown, r: { min: number; max: number }): boolean =>
    Number.isInteger(v) && (v as number) >= r.min && (v as number) <= r.max;
  if (e.cooldownMs !== undefined && !int(e.cooldownMs, COOLDOWN_MS)) throw new RouteSettingsError('failover.cooldownMs', 'out_of_range');
  if (e.failuresToOpen !== undefined && !int(e.failuresToOpen, FAILURES_TO_OPEN))
    throw new RouteSettingsError('failover.failuresToOpen', 'out_of_range');
  if (e.sizes !== undefined && e.sizes !== 'all' && e.sizes !== 'primary') throw new RouteSettingsError('failover.sizes', 'invalid');
  const merged = { ...failoverOf(current), ...(e as Partial<FailoverSettings>) };
  return { ...merged, on: [...new Set(merged.on)] };
}
