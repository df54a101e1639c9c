import { Global, Inject, Injectable, Logger, Module, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import Redis, { RedisOptions } from 'ioredis';
import { BootDependencyError, hostOf, KILN_CONFIG, KilnConfig } from '@app/config';

/** How long one connection attempt may take before ioredis gives up on it and retries. */
const CONNECT_TIMEOUT_MS = 2000;
/** The longest pause between reconnection attempts, so a restarted Redis is found within it. */
const MAX_RECONNECT_DELAY_MS = 1000;

/**
 * Connection options for a client that answers requests: no command waits longer than
 * REDIS_COMMAND_TIMEOUT_MS, queued or sent (a frozen Redis costs a request that long, not
 * until Redis wakes). Commands issued while disconnected wait in ioredis's offline queue,
 * which is bounded twice: by the command timeout, and by `maxRetriesPerRequest: 1`, which
 * empties the queue after every second failed reconnection (about a second). Not for
 * blocking commands (Bull's worker clients), which the timeout would cut.
 */
export function redisClientOptions(config: KilnConfig): RedisOptions {
  return {
    commandTimeout: config.redisCommandTimeoutMs,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    retryStrategy: (attempt: number) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  };
}

/**
 * One shared ioredis connection for Kiln's own keys (rate limits, model concurrency caps,
 * readiness). Bull opens its own. Every key goes through `key()` so a run's prefix isolates it.
 */
@Injectable()
export class RedisService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(RedisService.name);
  readonly client: Redis;
  readonly prefix: string;
  /** host:port, for messages (never the URL, which may hold a password). */
  readonly host: string;
  /** The connection's latest error, for saying why Redis is not reachable (a socket error carries its code). */
  private lastError: NodeJS.ErrnoException | null = null;

  constructor(@Inject(KILN_CONFIG) config: KilnConfig) {
    this.prefix = config.redisPrefix;
    this.host = hostOf(config.redisUrl, 6379);
    this.client = new Redis(config.redisUrl, { ...redisClientOptions(config), lazyConnect: false });
    // Errors surface on the commands that fail; without a listener ioredis would log noise.
    this.client.on('error', (err: Error) => {
      this.lastError = err;
    });
  }

  /**
   * Gives the connection a moment at boot, so the first requests find it ready rather than
   * falling back; a Redis that is down does not keep the process from starting (the api starts
   * not ready; the generator stops, see requireAtBoot).
   */
  async onModuleInit(): Promise<void> {
    if (!(await this.waitReady(CONNECT_TIMEOUT_MS))) {
      this.logger.error(`Redis at ${this.host} is not reachable (${this.unreachableCause()})`);
    }
  }

  /**
   * For processes that cannot do anything without Redis (the generator): waits up to `ms` for
   * the connection, then throws a BootDependencyError naming the host and the cause.
   */
  async requireAtBoot(ms: number): Promise<void> {
    if (!(await this.waitReady(ms))) throw new BootDependencyError('Redis', this.host, this.unreachableCause());
  }

  private unreachableCause(): string {
    const err = this.lastError;
    if (!err) return `no connection within the wait (${this.client.status})`;
    return err.code && !err.message.includes(err.code) ? `${err.code}: ${err.message}` : err.message;
  }

  /** Whether the connection is (or becomes within `ms`) ready. */
  async waitReady(ms: number): Promise<boolean> {
    if (this.client.status === 'ready') return true;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => done(false), ms);
      const onReady = () => done(true);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        resolve(ok);
      };
      this.client.once('ready', onReady);
    });
  }

  key(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }

  /** Whether the connection is up (commands may still time out on a frozen server). */
  get connected(): boolean {
    return this.client.status === 'ready';
  }

  async ping(timeoutMs = 1000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const res = await Promise.race([
        this.client.ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
        }),
      ]);
      return res === 'PONG';
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A promise still, as callers (the specs' teardowns) await it. */
  onApplicationShutdown(): Promise<void> {
    this.client.disconnect();
    return Promise.resolve();
  }
}

@Global()
@Module({ providers: [RedisService], exports: [RedisService] })
export class RedisModule {}
