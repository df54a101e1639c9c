import { Injectable, OnModuleInit } from '@nestjs/common';
import { RedisService } from '@app/redis';

/** With RedisService's own 2 s wait at init, a generator without Redis stops within 10 s. */
const REDIS_BOOT_WAIT_MS = 4000;

/**
 * A generator without Redis has no queue to take work from, so unlike the api it does not
 * start: it stops with the host and the cause, before the queue's workers begin (module init
 * runs before TasksProcessor's onApplicationBootstrap).
 */
@Injectable()
export class RedisBootCheck implements OnModuleInit {
  constructor(private readonly redis: RedisService) {}

  onModuleInit(): Promise<void> {
    return this.redis.requireAtBoot(REDIS_BOOT_WAIT_MS);
  }
}
