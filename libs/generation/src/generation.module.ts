import { Inject, Module, OnModuleInit } from '@nestjs/common';
import sharp from 'sharp';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { CatalogModule } from '@app/catalog';
import { MetricsModule } from '@app/metrics';
import { TasksModule } from '@app/tasks';
import { UploadsModule } from '@app/uploads';
import { EconomyCollector } from './economy/economy-collector.service';
import { ModelConcurrencyLimiter } from './limits/model-concurrency.limiter';
import { RoutePacer } from './limits/route-pacer';
import { RouteCircuit } from './limits/route-circuit';
import { RouteFailover } from './running/route-failover';
import { ProviderRegistry } from './running/provider-registry';
import { TaskRunnerService } from './running/task-runner.service';
import { UpstreamCanceller } from './running/upstream-canceller.service';
import { UpstreamPoller } from './running/upstream-poller.service';
import { CollectQueueResult } from './running/usecases/collect-queue-result.usecase';
import { HandToQueueUpstream } from './running/usecases/hand-to-queue-upstream.usecase';
import { SubmitWithIntent } from './running/usecases/submit-with-intent';
import { RunSteps } from './running/usecases/run-steps';
import { RunSyncRender } from './running/usecases/run-sync-render.usecase';
import { StoreEconomyResult } from './running/usecases/store-economy-result.usecase';
import { TaskOutcomes } from './running/usecases/task-outcomes';
import { GeneratorEnvReporter, TaskTelemetry } from './running/task-telemetry';
import { OrphanSweepService } from './upkeep/orphan-sweep.service';
import { QueueFeeder } from './upkeep/queue-feeder.service';
import { RetentionService } from './upkeep/retention.service';
import { TaskReconcilerService } from './upkeep/task-reconciler.service';

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
 * The generator's logic, a folder per concern: running/ (one task's lifecycle: the runner
 * and, in running/usecases/, a use case per execution mode around shared steps), limits/
 * (local and per-model concurrency), upkeep/ (feeding the queue, reconciliation, retention
 * and orphan sweeps). Needs what each app provides globally: KilnConfigModule,
 * DatabaseModule, RedisModule, StorageModule and KilnQueueModule.forRoot().
 */
@Module({
  imports: [TasksModule, UploadsModule, CatalogModule, MetricsModule],
  providers: [
    TaskRunnerService,
    RunSteps,
    TaskOutcomes,
    RunSyncRender,
    HandToQueueUpstream,
    SubmitWithIntent,
    CollectQueueResult,
    StoreEconomyResult,
    UpstreamPoller,
    UpstreamCanceller,
    EconomyCollector,
    TaskTelemetry,
    GeneratorEnvReporter,
    ProviderRegistry,
    TaskReconcilerService,
    ModelConcurrencyLimiter,
    RoutePacer,
    RouteCircuit,
    RouteFailover,
    QueueFeeder,
    RetentionService,
    OrphanSweepService,
  ],
  exports: [
    TaskRunnerService,
    UpstreamPoller,
    EconomyCollector,
    TaskReconcilerService,
    ModelConcurrencyLimiter,
    RoutePacer,
    RouteCircuit,
    RouteFailover,
    QueueFeeder,
    RetentionService,
    OrphanSweepService,
  ],
})
export class GenerationModule implements OnModuleInit {
  constructor(@Inject(KILN_CONFIG) private readonly config: KilnConfig) {}

  onModuleInit(): void {
    configureSharp(this.config.generator.renderConcurrency, this.config.generator.cpus);
  }
}
