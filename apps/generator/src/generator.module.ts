import { Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { KilnQueueModule } from '@app/tasks';
import { appLogDestination, KILN_CONFIG, KilnConfig, KilnConfigModule } from '@app/config';
import { DatabaseModule, DatabaseModuleOptions } from '@app/database';
import { GenerationModule } from '@app/generation';
import { MetricsModule } from '@app/metrics';
import { RedisModule } from '@app/redis';
import { StorageModule } from '@app/storage';
import { WebhooksModule } from '@app/webhooks';
import { GeneratorHealthServer } from './health.server';
import { MaintenanceScheduler } from './maintenance.scheduler';
import { RedisBootCheck } from './redis-boot.check';
import { TasksProcessor } from './tasks.processor';
import { WebhooksProcessor } from './webhooks.processor';

/**
 * The generator's database sessions: its writes are all fenced and re-done by the reconciler if
 * a crash undoes them (asyncCommit), and its grouped writes are planned on every run (customPlans).
 */
export const GENERATOR_SESSIONS: DatabaseModuleOptions = { asyncCommit: true, customPlans: true };

@Module({
  imports: [
    KilnConfigModule.forRoot(),
    LoggerModule.forRootAsync({
      inject: [KILN_CONFIG],
      useFactory: (config: KilnConfig) => ({ pinoHttp: [{ level: config.logLevel }, appLogDestination()] }),
    }),
    DatabaseModule.forRoot(GENERATOR_SESSIONS),
    RedisModule,
    StorageModule,
    KilnQueueModule.forRoot(),
    GenerationModule,
    MetricsModule,
    WebhooksModule,
  ],
  providers: [RedisBootCheck, TasksProcessor, MaintenanceScheduler, GeneratorHealthServer, WebhooksProcessor],
})
export class GeneratorModule {}
