import { BenchAccount } from '../lib/kiln';
import { sleep } from '../lib/util';

/** How one request ended, as a client sees it. */
export type Outcome = 'ok' | 'refused' | 'server_error' | 'timeout' | 'network';

export interface ApiEvent {
  kind: 'create' | 'poll';
  sentAt: number;
  answeredAt: number;
  outcome: Outcome;
  status: number;
}

export interface LoadOptions {
  baseUrl: string;
  accounts: BenchAccount[];
  model: string;
  /** Every request gives up after this long (counted as a timeout). */
  requestTimeoutMs: number;
}

/** Prompts per batch and copies per prompt: batches of 1 to 24 images, 7.5 on average. */
const MAX_PROMPTS = 8;
const MAX_COPIES = 3;
/** Concurrent creates and polls: a handful of clients, not a flood. */
const CREATES_IN_FLIGHT = 3;
const POLL_INTERVAL_MS = 250;
/** While a window's share of tasks is spent, a 1-image create this often keeps measuring the api. */
const PROBE_CREATE_INTERVAL_MS = 2000;

/**
 * The clients of the chaos run: creates batches through the public API at a pace the runner
 * sets, polls the unfinished ones, and records every answer. Batch ids the api acknowledged
 * with 201 are kept, to check afterwards that PostgreSQL has each of them.
 */
export class LoadClient {
  readonly acknowledged = new Map<string, number>();
  readonly events: ApiEvent[] = [];
  acknowledgedTasks = 0;
  private readonly unfinished: string[] = [];
  private ratePerSec = 0;
  private windowBudget = 0;
  private windowSpent = 0;
  private tokens = 0;
  private creatingStopped = false;
  private stopped = false;
  private createsInFlight = 0;
  private accountTurn = 0;
  private seq = 0;
  private lastProbeAt = 0;
  private loops: Promise<void>[] = [];

  constructor(private readonly opts: LoadOptions) {}

  start(): void {
    this.loops = [this.createLoop(), this.pollLoop()];
  }

  /** From now on: `ratePerSec` tasks a second, up to `budget` tasks, then only probes. */
  pace(ratePerSec: number, budget: number): void {
    this.ratePerSec = ratePerSec;
    this.windowBudget = budget;
    this.windowSpent = 0;
  }

  stopCreating(): void {
    this.creatingStopped = true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async createLoop(): Promise<void> {
    let last = Date.now();
    let nextSize = this.drawSize();
    while (!this.stopped) {
      await sleep(100);
      const now = Date.now();
      // A burst after an outage is capped: clients that failed do not all come back at once.
      this.tokens = Math.min(this.tokens + (this.ratePerSec * (now - last)) / 1000, 2 * MAX_PROMPTS * MAX_COPIES);
      last = now;
      if (this.creatingStopped || this.createsInFlight >= CREATES_IN_FLIGHT) continue;
      if (this.windowSpent < this.windowBudget) {
        if (this.tokens < nextSize.prompts * nextSize.copies) continue;
        this.tokens -= nextSize.prompts * nextSize.copies;
        void this.create(nextSize);
        nextSize = this.drawSize();
      } else if (now - this.lastProbeAt >= PROBE_CREATE_INTERVAL_MS) {
        this.lastProbeAt = now;
        void this.create({ prompts: 1, copies: 1 });
      }
    }
  }

  private drawSize(): { prompts: number; copies: number } {
    return { prompts: 1 + Math.floor(Math.random() * MAX_PROMPTS), copies: 1 + Math.floor(Math.random() * MAX_COPIES) };
  }

  private async create(size: { prompts: number; copies: number }): Promise<void> {
    this.createsInFlight += 1;
    const account = this.opts.accounts[this.accountTurn++ % this.opts.accounts.length];
    this.seq += 1;
    const prompts = Array.from({ length: size.prompts }, (_, i) => `chaos ${this.seq}.${i + 1}: a brick kiln at dusk`);
    try {
      const res = await this.request<{ id: string; total: number }>('create', 'POST', '/v1/batches', account.key, {
        model: this.opts.model,
        prompts,
        countPerCombo: size.copies,
      });
      if (res?.status === 201) {
        this.acknowledged.set(res.body.id, res.body.total);
        this.acknowledgedTasks += res.body.total;
        this.windowSpent += res.body.total;
        this.unfinished.push(`${account.key} ${res.body.id}`);
      }
    } finally {
      this.createsInFlight -= 1;
    }
  }

  private async pollLoop(): Promise<void> {
    let lastPolled: string | null = null;
    while (!this.stopped) {
      await sleep(POLL_INTERVAL_MS);
      // Oldest first, round robin; with nothing unfinished, the last batch is polled anyway,
      // so polling keeps measuring the api.
      const next = this.unfinished.shift();
      const entry: string | null = next ?? lastPolled;
      if (!entry) continue;
      lastPolled = entry;
      const [key, id] = entry.split(' ');
      const res = await this.request<{ done: boolean }>('poll', 'GET', `/v1/batches/${id}`, key);
      if (next && !(res?.status === 200 && res.body.done)) this.unfinished.push(next);
    }
  }

  private async request<T>(kind: ApiEvent['kind'], method: string, urlPath: string, token: string, body?: unknown): Promise<{ status: number; body: T } | null> {
    const sentAt = Date.now();
    const record = (outcome: Outcome, status: number) => this.events.push({ kind, sentAt, answeredAt: Date.now(), outcome, status });
    try {
      const res = await fetch(`${this.opts.baseUrl}${urlPath}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.opts.requestTimeoutMs),
      });
      const text = await res.text();
      record(res.status < 400 ? 'ok' : res.status < 500 ? 'refused' : 'server_error', res.status);
      if (res.status >= 400) return { status: res.status, body: null as T };
      return { status: res.status, body: JSON.parse(text) as T };
    } catch (err) {
      const name = (err as Error).name;
      record(name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : 'network', 0);
      return null;
    }
  }
}
