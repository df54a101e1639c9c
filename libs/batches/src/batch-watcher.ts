import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import type Redis from 'ioredis';
import { RedisService } from '@app/redis';
import { batchChangeChannel } from '@app/tasks';

/**
 * Longest a subscription may take before the poll falls back to re-reading the database. A
 * burst of held polls keeps the event loop busy, so the confirmation may be slow to be read
 * while Redis is fine; a poll waits for it at most this long (and never past its own wait).
 */
const SUBSCRIBE_TIMEOUT_MS = 5000;

/** One held poll's view of its batch's announcements. */
export interface BatchWatch {
  /**
   * Resolves with when (performance.now()) a change was announced since the last call (or
   * since the watch started), null after `ms` without one, or at once when the subscription
   * is lost (the caller then re-reads the database on its own schedule).
   */
  next(ms: number): Promise<number | null>;
  /** Whether announcements are arriving (the subscriber connection is up). */
  readonly live: boolean;
  close(): void;
}

interface Waiter {
  /** When the latest unconsumed announcement arrived, or null. */
  announced: number | null;
  wake: (() => void) | null;
}

/**
 * The api process's one Redis subscriber connection, shared by every held long poll: each
 * batch's channel is subscribed while at least one poll watches it and fanned out in memory.
 * A held poll thus holds neither a database connection nor a Redis connection of its own.
 */
@Injectable()
export class BatchWatcher implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(BatchWatcher.name);
  private subscriber: Redis | null = null;
  private readonly waiters = new Map<string, Set<Waiter>>();
  /** Each watched channel's SUBSCRIBE, which every watch of it awaits before it counts. */
  private readonly subscribed = new Map<string, Promise<unknown>>();

  constructor(private readonly redis: RedisService) {}

  /** Connects at start, so the first held poll finds the subscriber ready. */
  onModuleInit(): void {
    this.connection();
  }

  /** Held polls across all batches (for metrics and tests). */
  get watching(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /**
   * Subscribes to the batch's announcements before the caller reads its version, so no change
   * committed after that read goes unannounced. Null when Redis does not answer in time: the
   * caller then polls the database.
   */
  async watch(batchId: string, timeoutMs = SUBSCRIBE_TIMEOUT_MS): Promise<BatchWatch | null> {
    const subscriber = this.connection();
    if (subscriber.status !== 'ready') return null;
    const channel = batchChangeChannel(this.redis, batchId);
    const waiter: Waiter = { announced: null, wake: null };
    let set = this.waiters.get(channel);
    if (!set) {
      set = new Set();
      this.waiters.set(channel, set);
      this.subscribed.set(channel, subscriber.subscribe(channel));
    }
    set.add(waiter);
    const subscribing = this.subscribed.get(channel)!;
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      waiter.wake?.();
      const current = this.waiters.get(channel);
      if (!current) return;
      current.delete(waiter);
      if (current.size === 0) {
        this.waiters.delete(channel);
        this.subscribed.delete(channel);
        subscriber.unsubscribe(channel).catch(() => undefined);
      }
    };
    try {
      await withTimeout(subscribing, Math.min(timeoutMs, SUBSCRIBE_TIMEOUT_MS));
    } catch (err) {
      this.logger.debug(`Could not subscribe to ${channel}: ${(err as Error).message}`);
      // A failed SUBSCRIBE is not kept: the next poll of this batch asks again.
      subscribing.catch(() => this.subscribed.get(channel) === subscribing && this.subscribed.delete(channel));
      close();
      return null;
    }
    return {
      get live() {
        return subscriber.status === 'ready';
      },
      next: (ms) =>
        new Promise<number | null>((resolve) => {
          if (waiter.announced !== null || closed || subscriber.status !== 'ready') {
            const announced = waiter.announced;
            waiter.announced = null;
            return resolve(announced);
          }
          const timer = setTimeout(() => settle(), Math.max(0, ms));
          const settle = (): void => {
            clearTimeout(timer);
            waiter.wake = null;
            const announced = waiter.announced;
            waiter.announced = null;
            resolve(announced);
          };
          waiter.wake = settle;
        }),
      close,
    };
  }

  onApplicationShutdown(): void {
    for (const set of this.waiters.values()) for (const w of set) w.wake?.();
    this.subscriber?.disconnect();
  }

  private connection(): Redis {
    if (this.subscriber) return this.subscriber;
    // A connection of its own: one in subscriber mode cannot run other commands.
    const subscriber = this.redis.client.duplicate();
    subscriber.on('error', () => undefined);
    subscriber.on('message', (channel: string) => {
      const at = performance.now();
      for (const w of this.waiters.get(channel) ?? []) {
        w.announced = at;
        w.wake?.();
      }
    });
    // A lost connection wakes every held poll, so each re-reads and falls back to polling
    // until ioredis reconnects (and resubscribes).
    subscriber.on('close', () => {
      for (const set of this.waiters.values()) for (const w of set) w.wake?.();
    });
    this.subscriber = subscriber;
    return subscriber;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
