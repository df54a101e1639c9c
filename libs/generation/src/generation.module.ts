import { Inject, Module, OnModuleInit } from '@nestjs/common';
import sharp from 'sharp';
import { BatchesModule } from '@app/batches';
import { BillingModule } from '@app/billing';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { UploadsModule } from '@app/uploads';
import { ModelConcurrencyLimiter } from './model-concurrency.limiter';
import { OrphanSweepService } from './orphan-sweep.service';
import { QueueFeeder } from './queue-feeder.service';
import { RetentionService } from './retention.service';
import { TaskReconcilerService } from './task-reconciler.service';
import { TaskRunnerService } from './task-runner.service';
import { TaskStateStore } from './task-state.store';

/**
 * libvips threads per image operation. Renders already run `renderConcurrency` at a time,
 * so each gets an equal share of the cores rather than all of them fighting over each core
 * (sharp's default here is 1 thread, which leaves cores idle when only one render runs).
 */
export function configureSharp(renderConcurrency: number, cores: number): number {
  const threads = Math.max(1, Math.floor(cores / Math.max(1, renderConcurrency)));
  sharp.concurrency(threads);
  // libvips' operation cache only pays off when the same operation on the same input repeats;
  // a generator never repeats one, so the cache would only hold finished 4K images' memory.
  sharp.cache(false);
  return threads;
}

/**
 * The generator's logic: task lifecycle, limits, feeding the queue, reconciliation, retention and orphan sweeps. Needs what each app
 * provides globally: KilnConfigModule, DatabaseModule, RedisModule, StorageModule and
 * KilnQueueModule.forRoot().
 */
@Module({
  imports: [BillingModule, BatchesModule, UploadsModule],
  providers: [TaskStateStore, TaskRunnerService, TaskReconcilerService, ModelConcurrencyLimiter, QueueFeeder, RetentionService, OrphanSweepService],
  exports: [TaskStateStore, TaskRunnerService, TaskReconcilerService, ModelConcurrencyLimiter, QueueFeeder, RetentionService, OrphanSweepService],
})
export class GenerationModule implements OnModuleInit {
  constructor(@Inject(KILN_CONFIG) private readonly config: KilnConfig) {}

  onModuleInit(): void {
    configureSharp(this.config.generator.renderConcurrency, this.config.generator.cpus);
  }
}
