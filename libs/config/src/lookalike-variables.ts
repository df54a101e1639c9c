import { getMetadataStorage } from 'class-validator';
import { UPSTREAM_KEY_VARIABLES } from '@app/providers';
import { EnvSchema, isUpstreamKeyName, SECRET_VARIABLES } from './env.schema';

/** Prefixes only Kiln's own variables use: a name with one of them that Kiln does not read is a typo. */
const KILN_PREFIXES = ['KILN_', 'GENERATOR_', 'TASK_', 'QUEUE_', 'MINIO_', 'UPSTREAM_', 'RENDER_', 'DISPATCH_', 'RETENTION_', 'ORPHAN_'];
/**
 * Kiln variables the server's config does not read but another part of Kiln does: the stage
 * timeline (libs/metrics, in the api and the generator), the SDK's and the CLI's, and the
 * bench's and the tests' own (prefixes). An operator's shell that exports them is not wrong.
 */
const OTHER_KILN_VARIABLES = new Set(['KILN_STAGE_TIMELINE', 'KILN_URL', 'KILN_API_KEY', 'KILN_SESSION', 'KILN_EMAIL', 'KILN_PASSWORD']);
const OTHER_KILN_PREFIXES = ['KILN_BENCH_', 'KILN_TEST_'];
/** Shorter names are too often someone else's (PWD, HOME) to compare by spelling. */
const MIN_COMPARED_LENGTH = 6;
const MAX_TYPOS = 2;

/** Every variable EnvSchema declares, and every provider type's key variable. */
export function knownVariables(): string[] {
  const metadata = getMetadataStorage().getTargetValidationMetadatas(EnvSchema, '', true, false);
  return [...new Set([...metadata.map((m) => m.propertyName), ...UPSTREAM_KEY_VARIABLES])].sort();
}

/**
 * Variables that look like Kiln's but are not any it reads (GENERATOR_CONCURENCY): Kiln would
 * silently use the default, so each one is warned about at boot with the name it resembles.
 */
export function lookalikeWarnings(raw: Record<string, unknown>, known: readonly string[] = knownVariables()): string[] {
  const exact = new Set(known);
  const secretFiles = new Set(SECRET_VARIABLES.map((name) => `${name}_FILE`));
  const warnings: string[] = [];
  for (const name of Object.keys(raw).sort()) {
    if (exact.has(name) || secretFiles.has(name) || isUpstreamKeyName(name.replace(/_FILE$/, ''))) continue;
    if (OTHER_KILN_VARIABLES.has(name) || OTHER_KILN_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    const nearest = nearestName(name, known);
    if (nearest) {
      warnings.push(`${name} is not a Kiln variable and is ignored; did you mean ${nearest}?`);
    } else if (KILN_PREFIXES.some((prefix) => name.startsWith(prefix))) {
      warnings.push(`${name} is not a Kiln variable and is ignored (see the README's configuration table)`);
    }
  }
  return warnings;
}

function nearestName(name: string, known: readonly string[]): string | null {
  if (name.length < MIN_COMPARED_LENGTH) return null;
  let best: { name: string; distance: number } | null = null;
  for (const candidate of known) {
    if (Math.abs(candidate.length - name.length) > MAX_TYPOS) continue;
    const distance = editDistance(name, candidate);
    if (distance <= MAX_TYPOS && (!best || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name ?? null;
}

/** Levenshtein distance: insertions, deletions and substitutions. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}
