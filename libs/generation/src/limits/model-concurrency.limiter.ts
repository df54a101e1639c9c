import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { abortReason } from '@app/errors';
import { RedisScript, RedisService } from '@app/redis';
import { PriorityLine } from './priority-line';

/**
 * Shared head of ACQUIRE and HAND_OVER. Time comes from the Redis server, so replicas with
 * skewed clocks agree on when a lease has expired; expired leases are dropped first.
 * `room` keeps replicas fair: the pump that holds slots re-takes a released one within a
 * round trip while the others only poll, so without it one replica with a backlog would
 * keep every slot. While other replicas are short of slots (KEYS[2]: owner -> until when),
 * an owner may hold an even share of the cap; returns how many more it may take.
 */
const PRELUDE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local function room(owner, cap)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local others = redis.call('ZCARD', KEYS[2])
  if redis.call('ZSCORE', KEYS[2], owner) then others = others - 1 end
  if others == 0 then return cap end
  local held, prefix = 0, owner .. ':'
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if string.sub(member, 1, #prefix) == prefix then held = held + 1 end
  end
  return math.ceil(cap / (others + 1)) - held
end
-- The cap: the route pacing's window (KEYS[3], a hash every replica's answers move) when the
-- caller names one and it holds a window, at most the route's ceiling; else the caller's own.
local function capOf(given, ceiling)
  if KEYS[3] then
    local window = tonumber(redis.call('HGET', KEYS[3], 'window'))
    if window then return math.max(1, math.min(ceiling, math.floor(window))) end
  end
  return given
end
`;

/**
 * Gives slots to as many of the members as are free (fewer than `cap` leases) and fair, in
 * the order given, so the first members go to the head of the caller's line. An owner that
 * got fewer than it asked for is short until its next call (or `shortMs`).
 * KEYS[1] slots zset, KEYS[2] short owners zset, KEYS[3] (optional) the route's pace hash;
 * ARGV: cap, ceiling, leaseMs, shortMs, owner, member...
 * Returns {how many of the first members now hold a slot, the cap applied}.
 */
const ACQUIRE = new RedisScript(`${PRELUDE}
local lease, shortMs, owner = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local cap = capOf(tonumber(ARGV[1]), tonumber(ARGV[2]))
local wanted = #ARGV - 5
local granted = math.max(0, math.min(wanted, cap - redis.call('ZCARD', KEYS[1]), room(owner, cap)))
for i = 6, granted + 5 do
  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
end
if granted > 0 then redis.call('PEXPIRE', KEYS[1], lease * 2) end
if granted < wanted then
  redis.call('ZADD', KEYS[2], now + shortMs, owner)
  redis.call('PEXPIRE', KEYS[2], shortMs * 2)
else
  redis.call('ZREM', KEYS[2], owner)
end
return {granted, cap}`);

/**
 * Releases lease `from` and, when it was still live and the owner keeps within its fair
 * share, gives its slot to `to` with a fresh lease: the number of leases never changes, so
 * no replica can see the cap exceeded. An expired lease may already have been counted as
 * free and taken elsewhere, so it is only dropped. KEYS as ACQUIRE's; ARGV: cap, leaseMs,
 * owner, from, to. Returns 1 when `to` holds the slot, 0 when `from` had expired, -1 when
 * the slot was freed for replicas short of their share or for a cap lowered meanwhile.
 * KEYS[3] and ARGV[2] (ceiling) as ACQUIRE's.
 */
const HAND_OVER = new RedisScript(`${PRELUDE}
local lease, owner, from, to = tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
local cap = capOf(tonumber(ARGV[1]), tonumber(ARGV[2]))
if not redis.call('ZSCORE', KEYS[1], from) then return 0 end
-- A cap lowered meanwhile (route pacing shrank its window): the slot is not handed on.
local fair = room(owner, cap) >= 0 and redis.call('ZCARD', KEYS[1]) <= cap
redis.call('ZREM', KEYS[1], from)
if not fair then return -1 end
redis.call('ZADD', KEYS[1], now + lease, to)
redis.call('PEXPIRE', KEYS[1], lease * 2)
return 1`);

/** Extends a lease still held; returns 0 when it already expired (the slot may be someone else's). */
const RENEW = new RedisScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score or tonumber(score) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1`);

export interface ModelLease {
  release(): void;
}

/**
 * A cap every replica reads from Redis: the route pacing's hash (`key`, field `window`), at
 * most `ceiling` (the route's maxConcurrency). A replica whose calls all wait learns no window
 * from answers of its own; with its last one as the cap it could stay below the slots the
 * others hold, get none, and as a replica short of slots keep the others to half the cap.
 */
export interface SharedWindow {
  key: string;
  ceiling: number;
}

interface ModelLine {
  waiters: PriorityLine<ModelLease>;
  pumping: boolean;
  /** Released slots on their way to this line (HAND_OVER calls in flight), one waiter each. */
  handingOver: number;
  /** The last call got fewer slots than asked for: Redis counts this replica as short. */
  short: boolean;
  /** The model's cap, as its latest acquirer's batch routes it (or the last the pace hash told). */
  cap: number;
  /** The latest acquirer's route pacing: its hash's window is the cap, up to `ceiling`. */
  pacing?: SharedWindow;
  wake?: () => void;
}

const MIN_POLL_MS = 20;
const MAX_POLL_MS = 500;
/** Outlasts the longest pause between two polls (1.5 MAX_POLL_MS), so a short replica stays counted. */
const SHORT_MS = 2000;

/**
 * A per-model cap on concurrent upstream calls, shared by every generator replica: a
 * Redis sorted set of leases (member -> expiry), taken and renewed by Lua scripts. A
 * replica killed mid-call stops renewing, so its leases expire after `leaseMs` and the
 * slots come back without anyone cleaning up. Inside one process, waiters for a model form
 * a local line ordered like the queue (priority, then arrival). One pump per line asks for
 * as many slots as the line has waiters (up to the cap) in one script call, and polls with
 * one call while the cap is reached, so Redis sees one call per poll, not one per task. A
 * released lease goes straight to the line's next waiter in a single call. While several
 * replicas are short of slots, each keeps to an even share of the cap (see PRELUDE);
 * priorities order waiters within a replica, not across replicas.
 */
@Injectable()
export class ModelConcurrencyLimiter {
  private readonly logger = new Logger(ModelConcurrencyLimiter.name);
  private readonly owner = randomUUID();
  private readonly lines = new Map<string, ModelLine>();
  private seq = 0;
  /** Slots released this turn with nobody waiting for them, by model (releaseSoon). */
  private readonly releasing = new Map<string, string[]>();
  /**
   * Long enough to survive a GC pause or a slow Redis (renewed every third of it), short
   * enough that a killed generator's slots come back soon: its tasks, taken over, wait for
   * them (30 s held a model's whole cap that long after a SIGKILL, issue 46).
   */
  leaseMs = 10_000;

  constructor(
    private readonly redis: RedisService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /** The cap of a model whose route sets none (MODEL_CONCURRENCY_CAP). */
  get cap(): number {
    return this.config.generator.modelConcurrencyCap;
  }

  slotsKey(model: string): string {
    return this.redis.key('model-slots', model);
  }

  private shortKey(model: string): string {
    return this.redis.key('model-slots-short', model);
  }

  /**
   * Waits for a slot on `model`; rejects with the signal's reason when aborted first. `cap` is
   * the model's own (its provider route's `maxConcurrency`), else MODEL_CONCURRENCY_CAP. The
   * latest acquirer's cap applies to the model's line: after an operator changes it, batches
   * created since bring the new one.
   */
  acquire(model: string, opts: { priority?: number; signal?: AbortSignal; cap?: number; pacing?: SharedWindow } = {}): Promise<ModelLease> {
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const line = this.line(model);
    line.cap = opts.cap ?? this.cap;
    line.pacing = opts.pacing;
    const lease = line.waiters.join(opts.priority, signal);
    // A pump already running picks the newcomer up after its call, or at its next poll
    // when the cap is reached (a newcomer frees no slot, so it is no reason to ask early).
    void this.pump(model, line);
    return lease;
  }

  /**
   * A new cap for the model's waiting line (the route pacing's window moved): the pump uses it
   * from its next call, at once when the cap grew.
   */
  setCap(model: string, cap: number): void {
    const line = this.lines.get(model);
    if (!line || line.cap === cap) return;
    const grew = cap > line.cap;
    line.cap = cap;
    if (grew) line.wake?.();
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
      line = { waiters: new PriorityLine<ModelLease>(), pumping: false, handingOver: 0, short: false, cap: this.cap };
      this.lines.set(model, line);
    }
    return line;
  }

  /** Forgets an idle line, so the map holds only models someone is waiting for. */
  private retire(model: string, line: ModelLine): void {
    if (line.pumping || line.handingOver > 0 || line.waiters.length > 0) return;
    if (this.lines.get(model) === line) this.lines.delete(model);
    // Other replicas would otherwise keep to their share until SHORT_MS runs out.
    if (line.short) void this.redis.client.zrem(this.shortKey(model), this.owner).catch(() => undefined);
  }

  private async pump(model: string, line: ModelLine): Promise<void> {
    if (line.pumping) return;
    line.pumping = true;
    let pause = MIN_POLL_MS;
    try {
      // Acquirers of the same tick join the line first, so the first call serves them all.
      await Promise.resolve();
      while (line.waiters.length > line.handingOver) {
        const wanted = Math.min(Math.max(1, line.cap), line.waiters.length - line.handingOver);
        const members = Array.from({ length: wanted }, () => this.newMember());
        let granted: number;
        try {
          granted = await this.tryAcquire(model, line, members);
        } catch (err) {
          // Redis is unreachable: every waiter fails now and its task is retried later.
          line.waiters.rejectAll(err);
          break;
        }
        line.short = granted < wanted;
        this.distribute(model, line, members.slice(0, granted));
        if (granted > 0) pause = MIN_POLL_MS;
        if (!line.short) continue;
        // The cap (or this replica's share) is reached. Local releases hand their slots over
        // directly; slots freed by other replicas (or expired) are found by polling, with backoff.
        await this.sleep(line, pause);
        pause = Math.min(MAX_POLL_MS, pause * 2);
      }
    } finally {
      line.pumping = false;
      if (line.waiters.length > line.handingOver) void this.pump(model, line);
      else this.retire(model, line);
    }
  }

  private sleep(line: ModelLine, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms / 2 + Math.random() * ms);
      function done(): void {
        clearTimeout(timer);
        line.wake = undefined;
        resolve();
      }
      line.wake = done;
    });
  }

  /**
   * Gives held slots to the head of the line, in order. Waiters may have aborted while Redis
   * answered: what nobody takes is given back at once.
   */
  private distribute(model: string, line: ModelLine, members: string[]): void {
    const unused = members.filter((member) => !line.waiters.serve(() => this.lease(model, member)));
    if (unused.length > 0) void this.releaseMembers(model, unused);
  }

  private async tryAcquire(model: string, line: ModelLine, members: string[]): Promise<number> {
    const [granted, cap] = (await ACQUIRE.run(this.redis.client, this.scriptKeys(model, line), [
      line.cap,
      line.pacing?.ceiling ?? line.cap,
      this.leaseMs,
      SHORT_MS,
      this.owner,
      ...members,
    ])) as number[];
    if (line.pacing) line.cap = Number(cap);
    return Number(granted);
  }

  private scriptKeys(model: string, line: ModelLine): string[] {
    const keys = [this.slotsKey(model), this.shortKey(model)];
    return line.pacing ? [...keys, line.pacing.key] : keys;
  }

  private newMember(): string {
    return `${this.owner}:${++this.seq}`;
  }

  private lease(model: string, member: string): ModelLease {
    const key = this.slotsKey(model);
    let released = false;
    const renewal = setInterval(
      () => {
        RENEW.run(this.redis.client, [key], [this.leaseMs, member]).then(
          (ok) => {
            if (!released && Number(ok) !== 1) {
              this.logger.warn(`A ${model} slot lease expired while in use; the cap may be exceeded briefly`);
            }
          },
          () => undefined,
        );
      },
      Math.max(1000, Math.floor(this.leaseMs / 3)),
    );
    renewal.unref();
    return {
      release: () => {
        if (released) return;
        released = true;
        clearInterval(renewal);
        const line = this.lines.get(model);
        if (line && line.waiters.length > line.handingOver) void this.handOver(model, line, member);
        else this.releaseSoon(model, member);
      },
    };
  }

  /** One call instead of a release and the next acquire, when the slot may stay here. */
  private async handOver(model: string, line: ModelLine, from: string): Promise<void> {
    const to = this.newMember();
    line.handingOver++;
    let outcome: number;
    try {
      outcome = Number(
        await HAND_OVER.run(this.redis.client, this.scriptKeys(model, line), [
          line.cap,
          line.pacing?.ceiling ?? line.cap,
          this.leaseMs,
          this.owner,
          from,
          to,
        ]),
      );
    } catch {
      // The call may have run without its answer arriving: neither lease may linger.
      await this.releaseMembers(model, [from, to]);
      outcome = 0;
    } finally {
      line.handingOver--;
    }
    if (outcome === 1) {
      this.distribute(model, line, [to]);
    } else {
      // The waiter it was meant for asks again: at once when the lease had expired (a slot
      // may be free), at the next poll when the slot went to replicas short of their share.
      if (outcome === 0) line.wake?.();
      void this.pump(model, line);
    }
    this.retire(model, line);
  }

  /**
   * Releases with nobody waiting here, gathered until the end of this turn of the event loop:
   * the runs of a group-committed success end together, and one ZREM frees all their slots
   * (one Redis command per task before).
   */
  private releaseSoon(model: string, member: string): void {
    const members = this.releasing.get(model);
    if (members) {
      members.push(member);
      return;
    }
    this.releasing.set(model, [member]);
    if (this.releasing.size === 1) {
      setImmediate(() => {
        const all = [...this.releasing];
        this.releasing.clear();
        for (const [m, ms] of all) void this.releaseMembers(m, ms);
      });
    }
  }

  private async releaseMembers(model: string, members: string[]): Promise<void> {
    // A lost release only keeps the slot until its lease expires.
    await this.redis.client.zrem(this.slotsKey(model), ...members).catch(() => undefined);
  }
}
