import { BullModule } from '@nestjs/bull';
import { DynamicModule, Module } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { TASK_QUEUE } from './queue.contract';

/** Bull on the configured Redis, under the run's prefix, with the task queue registered. */
@Module({})
export class KilnQueueModule {
  static forRoot(): DynamicModule {
    const queue = BullModule.registerQueue({ name: TASK_QUEUE });
    return {
      module: KilnQueueModule,
      imports: [
        BullModule.forRootAsync({
          inject: [KILN_CONFIG],
          useFactory: (config: KilnConfig) => ({
            url: config.redisUrl,
            prefix: `${config.redisPrefix}:bull`,
            defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000 },
          }),
        }),
        queue,
      ],
      exports: [queue],
    };
  }
}
