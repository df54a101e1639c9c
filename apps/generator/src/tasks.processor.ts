import { InjectQueue } from '@nestjs/bull';
import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import type { Job, Queue } from 'bull';
import { RenderJobData, TASK_QUEUE, TaskJob } from '@app/tasks';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { EconomyCollector, QueueFeeder, TaskRunnerService } from '@app/generation';
import { stampStage } from '@app/metrics';

/**
 * Job name -> library service. Registered by hand rather than with @Process because the
 * concurrency comes from the configuration.
 */
@Injectable()
export class TasksProcessor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(TasksProcessor.name);

  constructor(
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    private readonly runner: TaskRunnerService,
    private readonly feeder: QueueFeeder,
    private readonly economy: EconomyCollector,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  onApplicationBootstrap(): void {
    const { concurrency } = this.config.generator;
    // Resolves only when the queue closes; errors are Bull's own (Redis), already emitted.
    this.queue
      .process(TaskJob.Render, concurrency, (job: Job<RenderJobData>) => {
        this.feeder.tookJob();
        const { taskId, batchId, seq, rerun } = job.data;
        if (batchId !== undefined) stampStage(batchId, 'taken');
        // Jobs added before they carried hints run the claim-first way.
        return this.runner.run(
          taskId,
          batchId !== undefined && typeof seq === 'number' ? { batchId, seq, rerun: rerun === true } : undefined,
        );
      })
      .catch((err) => this.logger.error(`The task queue stopped: ${(err as Error).message}`));
    this.feeder.start();
    this.runner.startPolling();
    // Economy work (upstream batches) runs apart from the task queue: standard tasks never wait behind it.
    this.economy.start();
    this.logger.log(`Consuming ${TASK_QUEUE} with ${concurrency} job(s) in flight`);
  }

  /**
   * Stop feeding and taking jobs, then let the ones in flight finish within the grace period;
   * tasks waiting on queue upstreams are given back for the next generator.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.feeder.stop();
    await this.economy.stop();
    await this.queue.pause(true, true).catch(() => undefined);
    // Polling stops first; tasks waiting upstream hold no worker and are given back after the
    // drain (which finishes the images being collected) for the next generator to resume.
    await this.runner.stopPolling();
    const { finished, interrupted } = await this.runner.drain(this.config.generator.shutdownGraceMs);
    const released = await this.runner.releaseWaiting();
    this.logger.log(
      `Drained: ${finished} task(s) finished, ${interrupted} given back to the queue, ${released} waiting upstream given back`,
    );
  }
}
