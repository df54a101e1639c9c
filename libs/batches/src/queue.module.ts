import { BullModule } from '@nestjs/bull';
import { DynamicModule, Module } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { TASK_QUEUE } from './queue.contract';

/**
 * Bull on the configured Redis, under the run's prefix, with the task queue registered.
 * Global, so library modules (BatchesModule) can inject the one queue without opening
 * a second set of Redis connections.
 */
@Module({})
export class KilnQueueModule {
  static forRoot(): DynamicModule {
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
