import { BullModule } from '@nestjs/bull';
import { DynamicModule, Module } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { redisClientOptions } from '@app/redis';
import { TASK_QUEUE } from './task-queue.contract';

export interface KilnQueueOptions {
  /**
   * For a process that only adds jobs and reads counts (the api): every queue command fails
   * within REDIS_COMMAND_TIMEOUT_MS, so a request never waits on a down or frozen Redis (the
   * tasks stay `pending` in PostgreSQL for the generator's feeder). Not for the generator,
   * whose worker clients block on purpose.
   */
  producerOnly?: boolean;
}

/**
 * Bull on the configured Redis, under the run's prefix, with the task queue registered.
 * Global, so library modules (TasksModule, GenerationModule) can inject the one queue without opening
 * a second set of Redis connections.
 */
@Module({})
export class KilnQueueModule {
  static forRoot(options: KilnQueueOptions = {}): DynamicModule {
    const queue = BullModule.registerQueue({ name: TASK_QUEUE });
    return {
      module: KilnQueueModule,
      global: true,
      imports: [
        BullModule.forRootAsync({
          inject: [KILN_CONFIG],
          useFactory: (config: KilnConfig) => ({
            url: config.redisUrl,
            prefix: `${config.redisPrefix}:bull`,
            ...(options.producerOnly ? { redis: redisClientOptions(config) } : {}),
            defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000 },
            // Only a processing queue (the generator) uses these: how soon a killed worker's
            // jobs are handed to another one (Bull stalled-job recovery).
            settings: {
              lockDuration: config.generator.lockDurationMs,
              stalledInterval: config.generator.stalledIntervalMs,
            },
          }),
        }),
        queue,
      ],
      exports: [queue],
    };
  }
}
