import { ChildProcess, fork } from 'node:child_process';
import * as fs from 'node:fs';
import { log, sleep } from './util';

export interface ChildOptions {
  name: string;
  /** A JavaScript file run by this same node binary. */
  script: string;
  args?: string[];
  env: NodeJS.ProcessEnv;
  /** stdout and stderr are appended here. */
  logFile: string;
  /** Extra node flags, e.g. the profiler preload. */
  execArgv?: string[];
}

/**
 * A node child process with its output in a log file and an IPC channel (the bench's own
 * baseline processes report through it; Kiln's processes ignore it). Stopped with SIGTERM,
 * then SIGKILL if it does not exit in time.
 */
export class NodeChild {
  readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;

  private constructor(
    readonly name: string,
    readonly proc: ChildProcess,
    readonly logFile: string,
  ) {
    this.exited = new Promise((resolve) => {
      proc.once('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? -1 : null);
        resolve(this.exitCode);
      });
    });
  }

  static start(opts: ChildOptions): NodeChild {
    const fd = fs.openSync(opts.logFile, 'a');
    const proc = fork(opts.script, opts.args ?? [], {
      env: opts.env,
      stdio: ['ignore', fd, fd, 'ipc'],
      execArgv: opts.execArgv ?? [],
    });
    fs.closeSync(fd);
    const child = new NodeChild(opts.name, proc, opts.logFile);
    // An unexpected IPC error must not crash the bench.
    proc.on('error', (err) => log(`${opts.name}: ${err.message}`));
    return child;
  }

  get pid(): number {
    if (this.proc.pid === undefined) throw new Error(`${this.name} has no pid`);
    return this.proc.pid;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  send(message: unknown): void {
    this.proc.send(message as never);
  }

  /** The next IPC message that satisfies `match`; rejects if the child exits first or on timeout. */
  nextMessage<T>(match: (m: T) => boolean, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => done(new Error(`${this.name}: no message within ${timeoutMs} ms`)), timeoutMs);
      const onMessage = (m: unknown) => {
        if (match(m as T)) done(null, m as T);
      };
      const onExit = (code: number | null) => done(new Error(`${this.name} exited (${code}); see ${this.logFile}`));
      const done = (err: Error | null, value?: T) => {
        clearTimeout(timer);
        this.proc.off('message', onMessage);
        this.proc.off('exit', onExit);
        if (err) reject(err);
        else resolve(value as T);
      };
      this.proc.on('message', onMessage);
      this.proc.once('exit', onExit);
    });
  }

  async stop(timeoutMs = 20_000): Promise<void> {
    if (!this.running) return;
    this.proc.kill('SIGTERM');
    const killed = await Promise.race([this.exited.then(() => true), sleep(timeoutMs).then(() => false)]);
    if (!killed) {
      log(`${this.name} ignored SIGTERM for ${timeoutMs} ms: SIGKILL`);
      this.proc.kill('SIGKILL');
      await this.exited;
    }
  }
}

export interface ProcStatus {
  rssMb: number;
  /** VmHWM: the peak resident set since the process started. */
  hwmMb: number;
}

export function readProcStatus(pid: number): ProcStatus | null {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(text)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, hwmMb: kb('VmHWM') / 1024 };
}

/** sysconf(_SC_CLK_TCK): 100 on every Linux kernel build Kiln targets. */
const CLOCK_TICKS = 100;

/** CPU seconds (user + system) the process has used so far, from /proc/<pid>/stat. */
export function readCpuSeconds(pid: number): number | null {
  const times = readCpuTimes(pid);
  return times && times.user + times.system;
}

/** CPU seconds the process has used so far in user space and in the kernel on its behalf. */
export function readCpuTimes(pid: number): { user: number; system: number } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: Number(fields[11]) / CLOCK_TICKS, system: Number(fields[12]) / CLOCK_TICKS };
  } catch {
    return null;
  }
}

export interface ProcessFigures {
  /** Highest VmRSS seen by sampling during the window. */
  peakRssMb: number;
  /** VmHWM at the end of the window (lifetime peak of the process). */
  hwmMb: number;
  /** CPU seconds used during the window, divided by its wall seconds (1.0 = one core busy). */
  cpuCores: number;
  /** The part of cpuCores spent in the kernel (system calls: files, sockets, futexes). */
  systemCores?: number;
}

/** Samples the RSS of a few processes while a measurement runs, and their CPU use over it. */
export class ProcessSampler {
  private readonly peaks = new Map<string, number>();
  private readonly cpuStart = new Map<string, { user: number; system: number }>();
  private readonly hwm = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private startedAt = 0;

  constructor(
    private readonly pids: Record<string, number>,
    private readonly intervalMs = 100,
  ) {}

  start(): this {
    this.startedAt = Date.now();
    for (const [name, pid] of Object.entries(this.pids)) this.cpuStart.set(name, readCpuTimes(pid) ?? { user: 0, system: 0 });
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    return this;
  }

  stop(): Record<string, ProcessFigures> {
    if (this.timer) clearInterval(this.timer);
    this.sample();
    const wall = Math.max(0.001, (Date.now() - this.startedAt) / 1000);
    const out: Record<string, ProcessFigures> = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      const start = this.cpuStart.get(name) ?? { user: 0, system: 0 };
      const end = readCpuTimes(pid) ?? start;
      const system = end.system - start.system;
      out[name] = {
        peakRssMb: this.peaks.get(name) ?? NaN,
        hwmMb: this.hwm.get(name) ?? NaN,
        cpuCores: (end.user - start.user + system) / wall,
        systemCores: system / wall,
      };
    }
    return out;
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      const s = readProcStatus(pid);
      if (!s) continue;
      this.peaks.set(name, Math.max(this.peaks.get(name) ?? 0, s.rssMb));
      this.hwm.set(name, s.hwmMb);
    }
  }
}

/**
 * CPU used over a window by a changing set of processes (PostgreSQL backends come and go):
 * pids listed at the start count from their start value, pids that appear later count whole.
 * Processes that are not on this host (a remote server) are simply not found.
 */
export class GroupCpuSampler {
  private readonly start = new Map<number, number>();
  private startedAt = 0;

  constructor(private readonly listPids: () => Promise<number[]>) {}

  async begin(): Promise<this> {
    this.startedAt = Date.now();
    for (const pid of await this.listPids()) {
      const cpu = readCpuSeconds(pid);
      if (cpu !== null) this.start.set(pid, cpu);
    }
    return this;
  }

  /** CPU cores used on average over the window (1.0 = one core busy). */
  async end(): Promise<number> {
    const wall = Math.max(0.001, (Date.now() - this.startedAt) / 1000);
    let total = 0;
    for (const pid of new Set([...this.start.keys(), ...(await this.listPids())])) {
      const cpu = readCpuSeconds(pid);
      if (cpu !== null) total += cpu - (this.start.get(pid) ?? 0);
    }
    return total / wall;
  }
}

/**
 * Samples a process's resident set every `intervalMs` from now on: `before` is the figure at
 * the start, `peak` the largest seen so far; `stop()` ends the sampling.
 */
export function sampleRss(pid: number, intervalMs = 50): { readonly before: number; readonly peak: number; stop(): void } {
  const before = readProcStatus(pid)?.rssMb ?? NaN;
  let peak = before;
  const timer = setInterval(() => {
    const rss = readProcStatus(pid)?.rssMb;
    if (rss && rss > peak) peak = rss;
  }, intervalMs);
  return {
    before,
    get peak() {
      return peak;
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * Microseconds some task of the machine waited for a CPU so far (/proc/pressure/cpu, "some"),
 * or null without PSI. Over a window, its growth / the window's length is the share of time
 * something was runnable and not running: on a machine shared with other work, what a latency
 * figure of the same window owes to that work.
 */
export function readCpuPressureUs(): number | null {
  try {
    const m = /^some .*total=(\d+)/m.exec(fs.readFileSync('/proc/pressure/cpu', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}
