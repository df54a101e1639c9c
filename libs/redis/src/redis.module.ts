import { Global, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { KILN_CONFIG, KilnConfig } from '@app/config';

/**
 * One shared ioredis connection for Kiln's own keys (rate limits, model concurrency caps,
 * readiness). Bull opens its own. Every key goes through `key()` so a run's prefix isolates it.
 */
@Injectable()
export class RedisService implements OnApplicationShutdown {
  readonly client: Redis;
  readonly prefix: string;

  constructor(@Inject(KILN_CONFIG) config: KilnConfig) {
    this.prefix = config.redisPrefix;
    this.client = new Redis(config.redisUrl, {
      lazyConnect: false,
      maxRetriesPerRequest: 2,
      enableOfflineQueue: true,
    });
    // Errors surface on the commands that fail; without a listener ioredis would log noise.
    this.client.on('error', () => undefined);
  }

  key(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }

  async ping(timeoutMs = 1000): Promise<boolean> {
    try {
      const res = await Promise.race([
        this.client.ping(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), timeoutMs)),
      ]);
      return res === 'PONG';
    } catch {
      return false;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.client.disconnect();
  }
}

@Global()
@Module({ providers: [RedisService], exports: [RedisService] })
export class RedisModule {}
