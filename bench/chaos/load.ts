import { BenchAccount } from '../lib/kiln';
import { sleep } from '../lib/util';

/** How one request ended, as a client sees it. */
export type Outcome = 'ok' | 'refused' | 'server_error' | 'timeout' | 'network';

export interface ApiEvent {
  kind: 'create' | 'poll' | 'cancel' | 'longpoll' | 'archive';
  sentAt: number;
  answeredAt: number;
  outcome: Outcome;
  status: number;
}

export interface LoadOptions {
  /** Every api process; requests go to each in turn. */
  baseUrls: string[];
  accounts: BenchAccount[];
  model: string;
  /** With --upstreams: other models (and the economy tier) take this share of the batches each. */
  upstreamModels?: { model: string; share: number; tier?: 'economy' }[];
  /** Every request gives up after this long (counted as a timeout). */
  requestTimeoutMs: number;
}

/** Prompts per batch and copies per prompt: batches of 1 to 24 images, 7.5 on average. */
const MAX_PROMPTS = 8;
const MAX_COPIES = 3;
/** Creates in flight at once (each retried with its Idempotency-Key until it is answered). */
const CREATES_IN_FLIGHT = 20;
/** A create that got no answer (5xx, timeout, no connection) is sent again with its key this often. */
const CREATE_RETRY_MS = 1000;
const CREATE_ATTEMPTS = 30;
/** This share of acknowledged batches is cancelled 0-4 s after creation, racing the generators. */
const CANCEL_SHARE = 0.25;
const CANCEL_WITHIN_MS = 4000;
/** Long polls held at once (Prefer: wait), each on an unfinished batch, through every fault. */
const LONG_POLLS = 4;
const LONG_POLL_WAIT_S = 10;
/** An archive of a random batch every so often, read whole, through every fault. */
const ARCHIVE_EVERY_MS = 2000;
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
  /** Batch ids each Idempotency-Key was answered with: one id per key, however many retries. */
  readonly idempotency = new Map<string, Set<string>>();
  /** Creates retried with their key after an unanswered attempt, and cancels that answered 200. */
  retriedCreates = 0;
  cancelled = 0;
  private readonly pending = new Set<Promise<void>>();
  /** Batch id -> its owner's key, for archives. */
  private readonly owners = new Map<string, string>();
  /** Long polls held past Prefer: wait and the api's own bounds, and 200 archives that were not a whole zip. */
  readonly longPollsHung: number[] = [];
  archivesTruncated = 0;
  archivesWhole = 0;
  private turn = 0;
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
    this.loops = [this.createLoop(), this.pollLoop(), ...Array.from({ length: LONG_POLLS }, () => this.longPollLoop()), this.archiveLoop()];
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
    await Promise.all([...this.pending]);
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
        this.track(this.create(nextSize));
        nextSize = this.drawSize();
      } else if (now - this.lastProbeAt >= PROBE_CREATE_INTERVAL_MS) {
        this.lastProbeAt = now;
        this.track(this.create({ prompts: 1, copies: 1 }));
      }
    }
  }

  /** The simulated model, or (--upstreams) one of the upstream models by its share. */
  private drawModel(): { model: string; tier?: 'economy' } {
    let r = Math.random();
    for (const m of this.opts.upstreamModels ?? []) {
      if (r < m.share) return m;
      r -= m.share;
    }
    return { model: this.opts.model };
  }

  private drawSize(): { prompts: number; copies: number } {
    return { prompts: 1 + Math.floor(Math.random() * MAX_PROMPTS), copies: 1 + Math.floor(Math.random() * MAX_COPIES) };
  }

  private async create(size: { prompts: number; copies: number }): Promise<void> {
    this.createsInFlight += 1;
    const account = this.opts.accounts[this.accountTurn++ % this.opts.accounts.length];
    this.seq += 1;
    const key = `chaos-${process.pid}-${this.seq}`;
    const prompts = Array.from({ length: size.prompts }, (_, i) => `chaos ${this.seq}.${i + 1}: a brick kiln at dusk`);
    const { model, tier } = this.drawModel();
    try {
      // Sent again with the same key until an answer says what became of it: a crash of
      // PostgreSQL or the api mid-create must neither lose the batch nor make a second one.
      for (let attempt = 1; attempt <= CREATE_ATTEMPTS && !this.stopped; attempt++) {
        if (attempt > 1) {
          this.retriedCreates += 1;
          await sleep(CREATE_RETRY_MS);
        }
        const res = await this.request<{ id: string; total: number }>(
          'create',
          'POST',
          '/v1/batches',
          account.key,
          {
            model,
            ...(tier ? { tier } : {}),
            prompts,
            countPerCombo: size.copies,
          },
          { 'idempotency-key': key },
        );
        if (res?.status === 201) {
          const ids = this.idempotency.get(key) ?? new Set<string>();
          ids.add(res.body.id);
          this.idempotency.set(key, ids);
          if (!this.acknowledged.has(res.body.id)) {
            this.acknowledged.set(res.body.id, res.body.total);
            this.acknowledgedTasks += res.body.total;
            this.windowSpent += res.body.total;
            this.unfinished.push(`${account.key} ${res.body.id}`);
            this.owners.set(res.body.id, account.key);
            if (Math.random() < CANCEL_SHARE) this.track(this.cancelLater(account.key, res.body.id));
          }
          return;
        }
        // 402 and other refusals are answers; a key still in use (409) or no answer is retried.
        if (res && res.status < 500 && res.status !== 409) return;
      }
    } finally {
      this.createsInFlight -= 1;
    }
  }

  /** Cancels the batch a moment after its creation, while generators take its tasks. */
  private async cancelLater(key: string, id: string): Promise<void> {
    await sleep(Math.random() * CANCEL_WITHIN_MS);
    for (let attempt = 1; attempt <= CREATE_ATTEMPTS && !this.stopped; attempt++) {
      const res = await this.request('cancel', 'POST', `/v1/batches/${id}/cancel`, key);
      if (res?.status === 200) this.cancelled += 1;
      // 409: it finished first; any other answer settles it too. No answer: try again.
      if (res && res.status < 500) return;
      await sleep(CREATE_RETRY_MS);
    }
  }

  /**
   * Holds long polls on unfinished batches. Each must answer within its wait plus Kiln's own
   * bound on a dependency that does not answer (a Redis outage: it re-reads every second; a
   * frozen PostgreSQL: 12 s): a client timeout here is a hung request.
   */
  private async longPollLoop(): Promise<void> {
    while (!this.stopped) {
      await sleep(200);
      const entry = this.unfinished[Math.floor(Math.random() * this.unfinished.length)];
      if (!entry) continue;
      const [key, id] = entry.split(' ');
      const timeoutMs = (LONG_POLL_WAIT_S + 15) * 1000;
      const sentAt = Date.now();
      const res = await this.request(
        'longpoll',
        'GET',
        `/v1/batches/${id}`,
        key,
        undefined,
        { prefer: `wait=${LONG_POLL_WAIT_S}` },
        timeoutMs,
      );
      if (!res && Date.now() - sentAt >= timeoutMs - 100) this.longPollsHung.push(sentAt);
    }
  }

  /** Downloads the archive of a random batch now and then: a 200 must be a whole zip, or a broken transfer. */
  private async archiveLoop(): Promise<void> {
    while (!this.stopped) {
      await sleep(ARCHIVE_EVERY_MS);
      const ids = [...this.owners.keys()];
      const id = ids[Math.floor(Math.random() * ids.length)];
      if (!id) continue;
      const res = await this.request<Buffer>(
        'archive',
        'GET',
        `/v1/batches/${id}/archive`,
        this.owners.get(id)!,
        undefined,
        {},
        this.opts.requestTimeoutMs,
        true,
      );
      if (res?.status !== 200) continue;
      // The end of central directory closes a whole zip; a zip cut short must never look whole.
      if (res.body.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06])) >= 0) this.archivesWhole += 1;
      else this.archivesTruncated += 1;
    }
  }

  private track(p: Promise<void>): void {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
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

  private async request<T>(
    kind: ApiEvent['kind'],
    method: string,
    urlPath: string,
    token: string,
    body?: unknown,
    headers: Record<string, string> = {},
    timeoutMs = this.opts.requestTimeoutMs,
    binary = false,
  ): Promise<{ status: number; body: T } | null> {
    const sentAt = Date.now();
    const baseUrl = this.opts.baseUrls[this.turn++ % this.opts.baseUrls.length];
    const record = (outcome: Outcome, status: number) => this.events.push({ kind, sentAt, answeredAt: Date.now(), outcome, status });
    try {
      const res = await fetch(`${baseUrl}${urlPath}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (binary) {
        const bytes = Buffer.from(await res.arrayBuffer());
        record(res.status < 400 ? 'ok' : res.status < 500 ? 'refused' : 'server_error', res.status);
        return { status: res.status, body: bytes as T };
      }
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
