import type { KilnStack } from './kiln';
import type { ProfileSummary } from './profile';

export const SCENARIOS = [
  'polling',
  'conditional',
  'long-poll',
  'streams',
  'archive',
  'creation',
  'pipeline',
  'latency',
  'memory',
  'webhooks',
  'upstream-queue',
  'openai-door',
  'rate-limited',
  'failover',
  'economy',
  'peer-gateway',
] as const;
export type ScenarioId = (typeof SCENARIOS)[number];

export interface RunOptions {
  scenarios: ScenarioId[];
  /** Progress streams held at once by the streams scenario (--streams). */
  streams: number;
  /** Image counts of the pipeline scenario. */
  pipelineSizes: number[];
  /** Alternating baseline/Kiln rounds of the load scenarios; the best round of each side counts. */
  rounds: number;
  pollingDurationSec: number;
  creationDurationSec: number;
  /** Profile every Kiln measurement, not only those short of their target. */
  profileAll: boolean;
  /** Never take the extra profiled passes. */
  noProfile: boolean;
  keep: boolean;
  logLevel: string;
  /** Extra environment of Kiln's api and of every generator (--api-env, --generator-env). */
  apiEnv: Record<string, string>;
  generatorEnv: Record<string, string>;
  outDir: string;
  /** A run of every scenario with default sizes: the only kind that writes latest.*. */
  full: boolean;
}

/**
 * One reported number. `ratio` is always kiln / baseline (or kiln / ideal): for a
 * throughput higher is better, for a latency, a wall time or a memory figure lower is.
 */
export interface Figure {
  metric: string;
  unit: string;
  kiln: number;
  baseline: number | null;
  baselineLabel?: string;
  ratio: number | null;
  /** e.g. ">= 0.5"; the comparison applies to the ratio unless `targetOn` says otherwise. */
  target?: string;
  targetOn?: 'ratio' | 'kiln';
  met?: boolean;
}

export interface ScenarioResult {
  id: ScenarioId;
  title: string;
  /** How it was measured, in a few sentences (setup, load, what the baseline does). */
  method: string[];
  figures: Figure[];
  notes: string[];
  profiles: ProfileSummary[];
  /** Everything else worth keeping: every round, status codes, CPU use, RSS. */
  details: Record<string, unknown>;
  durationSec: number;
  error?: string;
}

export interface BenchContext {
  stack: KilnStack;
  opts: RunOptions;
  repoRoot: string;
  /** Filled by the pipeline scenario, read by the memory scenario when both run. */
  shared: { pipelineMemory?: Record<string, unknown> };
}

/** A throughput figure: met when kiln / baseline >= min. */
export function throughput(metric: string, unit: string, kiln: number, baseline: number, min?: number): Figure {
  const ratio = baseline > 0 ? Math.round((kiln / baseline) * 100) / 100 : null;
  return {
    metric,
    unit,
    kiln,
    baseline,
    ratio,
    ...(min !== undefined ? { target: `>= ${min}`, targetOn: 'ratio' as const, met: ratio !== null && ratio >= min } : {}),
  };
}

/** A latency figure: the ratio says how many times slower than the baseline (lower is better). */
export function latency(metric: string, kiln: number, baseline: number): Figure {
  return { metric, unit: 'ms', kiln, baseline, ratio: baseline > 0 ? Math.round((kiln / baseline) * 100) / 100 : null };
}
