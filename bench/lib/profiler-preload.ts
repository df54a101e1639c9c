/**
 * Preloaded (`node -r`) into Kiln's processes by the bench. An IPC message
 * `{kilnBenchProfiler: 'start'}` starts the V8 CPU profiler; `{kilnBenchProfiler: 'stop'}`
 * stops it, writes `$KILN_BENCH_PROFILE_DIR/<label>-<n>.cpuprofile` and answers
 * `{kilnBenchProfile: <file>}`. So a profile covers exactly one measurement window, where
 * `node --cpu-prof` would cover start-up too and is only written on a clean exit, which
 * Nest's signal handling (it re-raises the signal) never gives. IPC rather than a signal:
 * the api's enableShutdownHooks() treats SIGUSR2 as a shutdown signal.
 *
 * `{kilnBenchGc: true}` runs a full garbage collection (the inspector's, so the process needs
 * no --expose-gc) and answers `{kilnBenchGcDone: process.memoryUsage()}`: memory figures that
 * do not depend on when V8 last chose to collect. `{kilnBenchMemory: true}` answers
 * `{kilnBenchMemoryDone: {usage, spaces}}` with no collection: process.memoryUsage() and V8's
 * heap spaces as they are, which split an RSS figure into V8's spaces and the rest.
 *
 * Only node built-ins here: this runs before the process loads anything else.
 */
import * as fs from 'node:fs';
import { Session } from 'node:inspector';
import * as path from 'node:path';
import * as v8 from 'node:v8';

const dir = process.env.KILN_BENCH_PROFILE_DIR;
const label = process.env.KILN_BENCH_PROFILE_LABEL ?? `pid${process.pid}`;

if (dir && process.send) {
  let session: Session | null = null;
  let written = 0;
  process.on('message', (m: { kilnBenchProfiler?: 'start' | 'stop'; kilnBenchGc?: boolean; kilnBenchMemory?: boolean }) => {
    if (m?.kilnBenchMemory) {
      const spaces = v8.getHeapSpaceStatistics().map((s) => ({ name: s.space_name, size: s.space_size, used: s.space_used_size }));
      process.send?.({ kilnBenchMemoryDone: { usage: process.memoryUsage(), spaces } });
    } else if (m?.kilnBenchGc) {
      const s = new Session();
      s.connect();
      // Disconnecting inside this callback hangs the process (Node 24): after it, not in it.
      s.post('HeapProfiler.collectGarbage', () =>
        setImmediate(() => {
          s.disconnect();
          process.send?.({ kilnBenchGcDone: process.memoryUsage() });
        }),
      );
    } else if (m?.kilnBenchProfiler === 'start' && !session) {
      const s = new Session();
      s.connect();
      s.post('Profiler.enable', () => s.post('Profiler.start'));
      session = s;
    } else if (m?.kilnBenchProfiler === 'stop' && session) {
      const s = session;
      session = null;
      s.post('Profiler.stop', (err, result) => {
        s.disconnect();
        if (err || !result) return process.send?.({ kilnBenchProfile: null, error: err?.message ?? 'no profile' });
        written += 1;
        const file = path.join(dir, `${label}-${written}.cpuprofile`);
        fs.writeFileSync(file, JSON.stringify(result.profile));
        process.send?.({ kilnBenchProfile: file });
      });
    }
  });
  // The listener must not keep the process alive once Kiln wants to exit.
  process.channel?.unref();
}
