import { openSync, writeSync } from 'node:fs';

/**
 * A per-stage timeline of requests across Kiln's processes, for benchmarks only: with
 * KILN_STAGE_TIMELINE set to a file, each stamp appends one line `<epoch ms> <id> <stage>`
 * to it (the api and the generator append to the same file; a line is one small O_APPEND
 * write, so lines never interleave). Unset, as deployed, a stamp is one check of a constant.
 * The bench's peer-gateway scenario reads the file (bench/findings.md, the door's timeline).
 */
const FILE = process.env.KILN_STAGE_TIMELINE || null;
let fd: number | null = null;

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes. */
export function timelineNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Records that `id` (a batch id) reached `stage` at `at` (now by default); a no-op unless KILN_STAGE_TIMELINE is set. */
export function stampStage(id: string, stage: string, at?: number): void {
  if (FILE === null) return;
  try {
    fd ??= openSync(FILE, 'a');
    writeSync(fd, `${(at ?? timelineNow()).toFixed(3)} ${id} ${stage}\n`);
  } catch {
    // Diagnostics never fail a request.
  }
}
