import { Injectable, OnModuleInit } from '@nestjs/common';
import type { IRoute, NextFunction, Request, Response } from 'express';
import { KilnMetrics } from '@app/metrics';
import { TaskDispatchService } from '@app/tasks';
import { WebhookEndpointsService } from '@app/webhooks';
import { RateLimitService } from '../auth/rate-limit.service';

/**
 * What only the api measures on each scrape: the queue (one shared Redis, so one reader is
 * enough; the generators do not repeat it), the task and webhook delivery backlogs in
 * PostgreSQL, and its own rate-limit fallback. A source that does not answer leaves its
 * gauges as they were and counts a failure (readOnScrape), so a scrape never fails or hangs
 * because Redis is down.
 */
@Injectable()
export class ApiMetricsCollector implements OnModuleInit {
  constructor(
    private readonly metrics: KilnMetrics,
    private readonly dispatch: TaskDispatchService,
    private readonly rateLimits: RateLimitService,
    private readonly webhooks: WebhookEndpointsService,
  ) {}

  onModuleInit(): void {
    this.readOnScrape('redis', async () => {
      const counts = await this.dispatch.jobCounts();
      for (const state of ['waiting', 'active', 'delayed', 'failed'] as const) this.metrics.queueJobs.set({ state }, counts[state] ?? 0);
    });
    this.readOnScrape('postgresql', async () => {
      const backlog = await this.dispatch.backlog();
      this.metrics.tasksPending.set(backlog.pending);
      this.metrics.oldestPendingAge.set(backlog.oldestPendingSeconds);
    });
    this.readOnScrape('postgresql', async () => {
      const backlog = await this.webhooks.backlog();
      this.metrics.webhookDeliveriesDue.set(backlog.due);
      this.metrics.webhookDeliveryLag.set(backlog.lagSeconds);
      this.metrics.webhookCircuitsOpen.set(backlog.circuitsOpen);
    });
    this.metrics.onCollect(() => {
      const fallback = this.rateLimits.fallbackStats();
      this.metrics.rateLimitFallback.set(fallback.active ? 1 : 0);
      this.metrics.rateLimitFallbackDecisions.set(fallback.decisions);
    });
  }

  /** Sets gauges from `source` at each scrape; when it does not answer they keep their values and a failure is counted. */
  private readOnScrape(source: 'redis' | 'postgresql', read: () => Promise<void>): void {
    this.metrics.onCollect(async () => {
      try {
        await read();
      } catch {
        this.metrics.collectFailures.inc({ source });
      }
    });
  }
}

/**
 * Counts and times every answer by its route pattern (`/v1/batches/:id`, never the path
 * itself, which would make a series per batch); requests no route matched share `unmatched`.
 */
export function httpMetricsMiddleware(metrics: KilnMetrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      // Express types the matched route as any: it is the router's route, absent when none matched.
      const matched = req.route as IRoute | undefined;
      const route = matched?.path ? `${req.baseUrl ?? ''}${matched.path}` : 'unmatched';
      const labels = { method: req.method, route, status: String(res.statusCode) };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}
