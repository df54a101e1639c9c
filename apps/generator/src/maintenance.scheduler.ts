import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { OrphanSweepService, RECONCILE_RECHECK_MS, RetentionService, TaskReconcilerService } from '@app/generation';
import { sweepExpiredIdempotencyKeys } from '@app/idempotency';
import { olderLayoutObjects, retentionCutoff, StorageDriver } from '@app/storage';
import { sweepWebhookDeliveries } from '@app/webhooks';

/** Retention, orphan, idempotency-key and webhook delivery log sweeps: soon after start (deploys may restart generators often), then hourly. */
const RETENTION_FIRST_MS = 60_000;
const RETENTION_EVERY_MS = 60 * 60_000;

/**
 * The generator's periodic work: the reconciler every reconcileIntervalMs (its Redis lock
 * keeps it to one replica at a time; it is also what brings a crashed generator's tasks
 * back, within QUEUE_LOCK_DURATION_MS + RECONCILE_INTERVAL_MS), and the retention, orphan
 * and idempotency-key sweeps (idempotent, so replicas may overlap; a key past its 24 hours
 * already counts as unused before it is swept). Each runs again only once its
 * previous run has ended; shutdown waits for all of them.
 */
@Injectable()
export class MaintenanceScheduler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(MaintenanceScheduler.name);
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(
    private readonly reconciler: TaskReconcilerService,
    private readonly retention: RetentionService,
    private readonly orphans: OrphanSweepService,
    private readonly storage: StorageDriver,
    @InjectDataSource() private readonly db: DataSource,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  onApplicationBootstrap(): void {
    const reconcileMs = this.config.generator.reconcileIntervalMs;
    // Sooner after a pass that found a crashed generator's tasks waiting for its job locks to expire.
    this.every(
      'Reconciler pass',
      reconcileMs,
      reconcileMs,
      () => this.reconciler.runExclusive(),
      (report) => (report?.awaitingLocks ? Math.min(reconcileMs, RECONCILE_RECHECK_MS) : reconcileMs),
    );
    this.every('Retention sweep', RETENTION_FIRST_MS, RETENTION_EVERY_MS, () => this.retention.sweep());
    this.every('Orphan sweep', RETENTION_FIRST_MS, RETENTION_EVERY_MS, () => this.orphans.sweep());
    this.every('Idempotency key sweep', RETENTION_FIRST_MS, RETENTION_EVERY_MS, () => sweepExpiredIdempotencyKeys(this.db));
    this.every('Webhook delivery log sweep', RETENTION_FIRST_MS, RETENTION_EVERY_MS, () =>
      sweepWebhookDeliveries(this.db, retentionCutoff(this.config.storage.retentionDays, new Date())),
    );
    void this.noteOlderLayout();
  }

  /**
   * Said once at start while the local driver still holds objects of its older layout, so an
   * operator knows when the build that stops reading it may be deployed (docs/operations.md
   * "Local storage on disk"). A readdir of each prefix, off the boot's path.
   */
  private async noteOlderLayout(): Promise<void> {
    try {
      const count = await olderLayoutObjects(this.storage);
      if (count > 0) {
        this.logger.log(
          `${count} objects of the local driver's older layout (a directory per object) remain under DATA_DIR/files; the retention sweep removes them`,
        );
      }
    } catch (err) {
      this.logger.warn(`Could not count the objects of the local driver's older layout: ${(err as Error).message}`);
    }
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all(this.running);
  }

  /** `run` every `everyMs` after its previous run ended, or as soon as `nextMs` says from that run's result. */
  private every<T>(
    what: string,
    firstMs: number,
    everyMs: number,
    run: () => Promise<T>,
    nextMs: (result: T | undefined) => number = () => everyMs,
  ): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      let result: T | undefined;
      const current = run()
        .then((r) => {
          result = r;
        })
        .catch((err) => this.logger.warn(`${what} failed: ${(err as Error).message}`))
        .finally(() => {
          this.running.delete(current);
          this.every(what, nextMs(result), everyMs, run, nextMs);
        });
      this.running.add(current);
    }, firstMs);
    timer.unref?.();
    this.timers.add(timer);
  }
}
