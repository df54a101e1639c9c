import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { RedisService } from '@app/redis';

/**
 * Takes a slot when fewer than `cap` unexpired leases exist. Time comes from the Redis
 * server, so replicas with skewed clocks agree on when a lease has expired.
 * KEYS[1] slots zset; ARGV: cap, leaseMs, member. Returns 1 when the slot is held.
 */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], lease * 2)
  return 1
end
return 0`;

/** Extends a lease still held; returns 0 when it already expired (the slot may be someone else's). */
const RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score or tonumber(score) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1`;

export interface ModelLease {
  release(): void;
}

interface Waiter {
  member: string;
  priority: number;
  resolve: (lease: ModelLease) => void;
  reject: (reason: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
}

interface ModelLine {
  waiters: Waiter[];
  pumping: boolean;
  wake?: () => void;
}

const MIN_POLL_MS = 20;
const MAX_POLL_MS = 500;

/**
 * A per-model cap on concurrent upstream calls, shared by every generator replica: a
 * Redis sorted set of leases (member -> expiry), taken and renewed by Lua scripts. A
 * replica killed mid-call stops renewing, so its leases expire after `leaseMs` and the
 * slots come back without anyone cleaning up. Inside one process, waiters for a model form
 * a local line ordered like the queue (priority, then arrival) and only its head polls
 * Redis, so a waiting process costs Redis one small script call per poll, not one per task.
 */
@Injectable()
export class ModelConcurrencyLimiter {
  private readonly logger = new Logger(ModelConcurrencyLimiter.name);
  private readonly owner = randomUUID();
  private readonly lines = new Map<string, ModelLine>();
  private seq = 0;
  /** Long enough to survive a GC pause or a slow Redis; renewed every third of it. */
  leaseMs = 30_000;

  constructor(
    private readonly redis: RedisService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  get cap(): number {
    return this.config.generator.modelConcurrencyCap;
  }

  slotsKey(model: string): string {
    return this.redis.key('model-slots', model);
  }

  /** Waits for a slot on `model`; rejects with the signal's reason when aborted first. */
  acquire(model: string, opts: { priority?: number; signal?: AbortSignal } = {}): Promise<ModelLease> {
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const line = this.line(model);
    return new Promise<ModelLease>((resolve, reject) => {
      const waiter: Waiter = {
        member: `${this.owner}:${++this.seq}`,
        priority: opts.priority ?? Number.MAX_SAFE_INTEGER,
        resolve,
        reject,
        signal,
      };
      if (signal) {
        waiter.onAbort = () => {
          const i = line.waiters.indexOf(waiter);
          if (i !== -1) line.waiters.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      let i = line.waiters.length;
      while (i > 0 && line.waiters[i - 1].priority > waiter.priority) i--;
      line.waiters.splice(i, 0, waiter);
      void this.pump(model, line);
    });
  }

  /** Leases currently held on a model, across all replicas (for tests and operators). */
  async inUse(model: string): Promise<number> {
    const key = this.slotsKey(model);
    const [seconds, micros] = await this.redis.client.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    return this.redis.client.zcount(key, `(${now}`, '+inf');
  }

  private line(model: string): ModelLine {
    let line = this.lines.get(model);
    if (!line) {
      line = { waiters: [], pumping: false };
      this.lines.set(model, line);
    }
    return line;
  }

  private async pump(model: string, line: ModelLine): Promise<void> {
    if (line.pumping) {
      line.wake?.();
      return;
    }
    line.pumping = true;
    let pause = MIN_POLL_MS;
    try {
      while (line.waiters.length > 0) {
        const head = line.waiters[0];
        let held: boolean;
        try {
          held = await this.tryAcquire(model, head.member);
        } catch (err) {
          // Redis is unreachable: every waiter fails now and its task is retried later.
          for (const w of line.waiters.splice(0)) this.settle(w, () => w.reject(err));
          break;
        }
        const index = line.waiters.indexOf(head);
        if (index === -1) {
          // Aborted while we asked Redis: give back what we took for it.
          if (held) await this.releaseMember(model, head.member);
          continue;
        }
        if (held) {
          line.waiters.splice(index, 1);
          this.settle(head, () => head.resolve(this.lease(model, head.member)));
          pause = MIN_POLL_MS;
          continue;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, pause / 2 + Math.random() * pause);
          function done(): void {
            clearTimeout(timer);
            resolve();
          }
          line.wake = done;
        });
        line.wake = undefined;
        pause = Math.min(MAX_POLL_MS, pause * 2);
      }
    } finally {
      line.pumping = false;
      if (line.waiters.length === 0) this.lines.delete(model);
      else void this.pump(model, line);
    }
  }

  private settle(w: Waiter, action: () => void): void {
    if (w.signal && w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
    action();
  }

  private async tryAcquire(model: string, member: string): Promise<boolean> {
    const res = await this.redis.client.eval(ACQUIRE, 1, this.slotsKey(model), this.cap, this.leaseMs, member);
    return Number(res) === 1;
  }

  private lease(model: string, member: string): ModelLease {
    const key = this.slotsKey(model);
    const renewal = setInterval(() => {
      this.redis.client.eval(RENEW, 1, key, this.leaseMs, member).then(
        (ok) => {
          if (Number(ok) !== 1) this.logger.warn(`A ${model} slot lease expired while in use; the cap may be exceeded briefly`);
        },
        () => undefined,
      );
    }, Math.max(1000, Math.floor(this.leaseMs / 3)));
    renewal.unref();
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        clearInterval(renewal);
        void this.releaseMember(model, member).finally(() => {
          const line = this.lines.get(model);
          if (line) line.wake?.();
        });
      },
    };
  }

  private async releaseMember(model: string, member: string): Promise<void> {
    // A lost release only keeps the slot until its lease expires.
    await this.redis.client.zrem(this.slotsKey(model), member).catch(() => undefined);
  }
}
