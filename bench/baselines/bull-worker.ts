/**
 * Baseline of the pipeline scenario's consumer: raw bull processing no-op jobs with the
 * generator's concurrency, in its own process as the generator is. The bench sends
 * `{type: 'expect', n}` before producing n jobs; this answers `{type: 'done', n, at}` (its
 * wall clock when the n-th job completed). Environment: REDIS_URL, RAW_BULL_PREFIX,
 * RAW_QUEUE, CONCURRENCY.
 */
import Bull from 'bull';

const queue = new Bull(process.env.RAW_QUEUE ?? 'bench-pipeline', process.env.REDIS_URL ?? '', {
  prefix: process.env.RAW_BULL_PREFIX ?? 'kiln-bench-raw:bull',
});
const concurrency = Number(process.env.CONCURRENCY ?? 50);

let expected = 0;
let completed = 0;

queue.on('completed', () => {
  completed += 1;
  if (expected > 0 && completed === expected) process.send?.({ type: 'done', n: completed, at: Date.now() });
});

process.on('message', (m: { type: string; n: number }) => {
  if (m.type === 'expect') {
    expected = m.n;
    completed = 0;
    process.send?.({ type: 'expecting', n: m.n });
  }
});

void queue.process('render', concurrency, () => Promise.resolve());
void queue.isReady().then(() => process.send?.({ type: 'ready' }));
process.on('SIGTERM', () => {
  void queue.close().finally(() => process.exit(0));
});
