import { Injectable, Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { KilnMetrics } from '@app/metrics';
import { metricsLabel, UpstreamCancel } from '@app/providers';
import { RedisService } from '@app/redis';
import { upstreamCancelChannel, UpstreamCancelStore, UpstreamCancelToSend } from '@app/tasks';
import { ProviderRegistry } from './provider-registry';
import { describeError } from './task-failure';

/** How often the sender looks for cancels without a signal (a lost one, a dead sender's, one held back by a 429). */
const LOOK_INTERVAL_MS = 1000;
/** A sender's hold on the cancels it took: longer than any cancel call may take (each is bounded by its route's timeout, at most 30 s). */
const SEND_LEASE_MS = 60_000;
/** Cancels taken at once; each is one small call. */
const TAKE_LIMIT = 32;
/** The least wait before a cancel an upstream answered 429 is asked again. */
const BUSY_RETRY_MS = 1000;

/**
 * The generator's sender of cancels that reach the upstream: a batch cancel marks in
 * PostgreSQL the tasks a queue upstream has accepted (the api never calls upstreams) and
 * signals through Redis; this takes them (UpstreamCancelStore), asks each upstream once
 * through the route's provider (`cancel`, bounded by the route's timeout), and records the
 * answer: the task cancelled and refunded when the upstream confirms it did not run, else left
 * to finish. It also looks every second, so a cancel asked while no generator ran, or whose
 * sender died, is sent after a restart.
 */
@Injectable()
export class UpstreamCanceller {
  private readonly logger = new Logger(UpstreamCanceller.name);
  private subscriber: Redis | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private readonly abort = new AbortController();

  constructor(
    private readonly store: UpstreamCancelStore,
    private readonly providers: ProviderRegistry,
    private readonly redis: RedisService,
    private readonly metrics: KilnMetrics,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.wake(), LOOK_INTERVAL_MS);
    this.timer.unref();
    const subscriber = this.redis.client.duplicate();
    subscriber.on('error', () => undefined);
    subscriber.on('message', () => this.wake());
    subscriber.subscribe(upstreamCancelChannel(this.redis)).catch((err: Error) => this.logger.debug(`Not subscribed: ${err.message}`));
    this.subscriber = subscriber;
    this.wake();
  }

  /** Stops looking; cancels being sent finish (each is bounded by its timeout), those not yet taken wait for the next generator. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.subscriber?.disconnect();
    this.subscriber = null;
    await this.running;
  }

  /** Sends what is due now, once at a time per process; a wake during a round runs another. */
  wake(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.round()
      .catch((err) => this.logger.warn(`Could not send the upstream cancels: ${describeError(err)}`))
      .finally(() => {
        this.running = null;
        if (this.again && this.timer) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async round(): Promise<void> {
    for (;;) {
      this.again = false;
      const due = await this.store.take(SEND_LEASE_MS, TAKE_LIMIT);
      await Promise.all(due.map((c) => this.send(c)));
      if (due.length < TAKE_LIMIT) return;
    }
  }

  private async send(c: UpstreamCancelToSend): Promise<void> {
    let answer: UpstreamCancel;
    try {
      const provider = this.providers.forQueueRoute(c.provider);
      answer = provider?.cancel
        ? await provider.cancel({ requestId: c.requestId, state: c.handle }, this.abort.signal)
        : { outcome: 'unknown', detail: 'the route has no upstream cancel' };
    } catch (err) {
      answer = { outcome: 'unknown', detail: describeError(err) };
    }
    this.metrics.upstreamCancels.inc({ model: c.model, provider: metricsLabel(c.provider), outcome: answer.outcome });
    try {
      if (answer.outcome === 'cancelled') {
        const done = await this.store.confirmed(c);
        this.logger.log(`Task ${c.taskId}: ${c.requestId} cancelled upstream (${answer.detail})${done ? ', refunded' : ''}`);
      } else if (answer.outcome === 'busy') {
        await this.store.later(c, new Date(Date.now() + Math.max(BUSY_RETRY_MS, answer.retryAfterMs ?? 0)));
      } else {
        await this.store.unconfirmed(c);
        this.logger.log(`Task ${c.taskId}: the upstream did not cancel ${c.requestId} (${answer.outcome}: ${answer.detail}); it finishes`);
      }
    } catch (err) {
      // The lease runs out and another sender asks again: the answer was not recorded.
      this.logger.warn(`Task ${c.taskId}: could not record the upstream's cancel answer: ${describeError(err)}`);
    }
  }
}
