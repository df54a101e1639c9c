import { Global, Inject, Injectable, Logger, Module, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import Redis, { RedisOptions } from 'ioredis';
import { KILN_CONFIG, KilnConfig } from '@app/config';

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

  constructor(@Inject(KILN_CONFIG) config: KilnConfig) {
    this.prefix = config.redisPrefix;
    this.client = new Redis(config.redisUrl, { ...redisClientOptions(config), lazyConnect: false });
    // Errors surface on the commands that fail; without a listener ioredis would log noise.
    this.client.on('error', () => undefined);
  }

  /**
   * Gives the connection a moment at boot, so the first requests find it ready rather than
   * falling back; a Redis that is down does not keep the process from starting.
   */
  async onModuleInit(): Promise<void> {
    if (this.client.status === 'ready') return;
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => done(false), CONNECT_TIMEOUT_MS);
      const onReady = () => done(true);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        resolve(ok);
      };
      this.client.once('ready', onReady);
    });
    if (!ready) this.logger.warn(`Redis is not reachable yet (${this.client.status}); carrying on without it until it is`);
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

  async onApplicationShutdown(): Promise<void> {
    this.client.disconnect();
  }
}

@Global()
@Module({ providers: [RedisService], exports: [RedisService] })
export class RedisModule {}
