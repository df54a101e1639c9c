import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { Queue } from 'bull';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { TASK_QUEUE, TaskDispatchService } from '@app/tasks';
import { describeError } from '../running/task-failure';

/** At most one warning per this long while PostgreSQL or Redis keeps failing. */
const WARN_EVERY_MS = 30_000;

/**
 * Keeps about `queue.depth` jobs waiting in Redis, taken from the pending tasks in fair order
 * (TaskDispatchService.feed). Tops up every `feedIntervalMs`, and early when this process's
 * workers have taken half the queue since the last look, so a fast pipeline never runs dry
 * between ticks. Every generator replica runs one; they share the work through SKIP LOCKED.
 */
@Injectable()
export class QueueFeeder {
  private readonly logger = new Logger(QueueFeeder.name);
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<number> | null = null;
  private stopped = true;
  /** Jobs believed waiting: the last count, less what this process's workers took since. */
  private estimate = 0;
  private lastWarning = 0;

  constructor(
    private readonly dispatcher: TaskDispatchService,
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.tick();
  }

  /** Stops topping up and waits for a top-up in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.current;
  }

  /** A worker of this process took a job. */
  tookJob(): void {
    this.estimate--;
    if (!this.stopped && this.estimate < this.config.queue.depth / 2) void this.feedNow();
  }

  /** One top-up (or the one already running); resolves with how many tasks it enqueued. */
  feedNow(): Promise<number> {
    this.current ??= this.topUp().finally(() => {
      this.current = null;
    });
    return this.current;
  }

  private async topUp(): Promise<number> {
    try {
      const waiting = await this.queue.getWaitingCount();
      const fed = await this.dispatcher.feed(this.config.queue.depth - waiting);
      this.estimate = waiting + fed;
      return fed;
    } catch (err) {
      if (Date.now() - this.lastWarning >= WARN_EVERY_MS) {
        this.lastWarning = Date.now();
        this.logger.warn(`Could not top the task queue up: ${describeError(err)}`);
      }
      return 0;
    }
  }

  private tick(): void {
    if (this.stopped) return;
    void this.feedNow().finally(() => {
      if (!this.stopped) this.timer = setTimeout(() => this.tick(), this.config.queue.feedIntervalMs);
    });
  }
}
