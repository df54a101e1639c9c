import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { TaskReconcilerService } from '@app/generation';

/** Runs the reconciler every reconcileIntervalMs; the lib's Redis lock keeps it to one replica at a time. */
@Injectable()
export class ReconcilerScheduler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ReconcilerScheduler.name);
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly reconciler: TaskReconcilerService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.schedule();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.current;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.current = this.reconciler
        .runExclusive()
        .catch((err) => this.logger.warn(`Reconciler pass failed: ${(err as Error).message}`))
        .finally(() => this.schedule());
    }, this.config.generator.reconcileIntervalMs);
  }
}
