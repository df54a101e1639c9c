import { Injectable, OnModuleInit } from '@nestjs/common';
import { RedisService } from '@app/redis';

/** A generator without Redis gives up this long after its process started (within 10 s, with margin). */
const REDIS_BOOT_DEADLINE_MS = 7500;
/** However slow the boot was, Redis gets at least this long past RedisService's own 2 s wait. */
const MIN_EXTRA_WAIT_MS = 500;

/**
 * A generator without Redis has no queue to take work from, so unlike the api it does not
 * start: it stops with the host and the cause, before the queue's workers begin (module init
 * runs before TasksProcessor's onApplicationBootstrap). The wait counts from the process's
 * start, since loading the code alone can take seconds on a busy machine.
 */
@Injectable()
export class RedisBootCheck implements OnModuleInit {
  constructor(private readonly redis: RedisService) {}

  onModuleInit(): Promise<void> {
    const left = REDIS_BOOT_DEADLINE_MS - process.uptime() * 1000;
    return this.redis.requireAtBoot(Math.max(MIN_EXTRA_WAIT_MS, left));
  }
}
