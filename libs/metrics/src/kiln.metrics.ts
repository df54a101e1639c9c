import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Seconds; renders and upstream calls run from tens of milliseconds to minutes. */
const TASK_SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300];
const HTTP_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Every metric Kiln exports, in one registry per process, served by GET /metrics on the api
 * (admin token) and on the generator's health listener. The names are the contract the
 * Grafana dashboard in docker/ and any alerting rely on: never rename one once released.
 *
 * A feature that adds metrics declares them here (the api's long polls, webhook deliveries,
 * ...), or registers its own on `registry`; gauges read on demand go through `onCollect`.
 */
@Injectable()
export class KilnMetrics implements OnModuleDestroy {
  /** Not prom-client's global registry: tests run several apps in one process. */
  readonly registry = new Registry();
  private readonly collectors = new Set<() => Promise<void> | void>();

  // --- api: HTTP ---------------------------------------------------------------------------
  readonly httpRequests = new Counter({
    name: 'kiln_http_requests_total',
    help: 'HTTP requests answered by the api, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'kiln_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: HTTP_SECONDS,
    registers: [this.registry],
  });

  // --- api: credits ------------------------------------------------------------------------
  readonly creditsCharged = new Counter({
    name: 'kiln_credits_charged_total',
    help: 'Credits charged for accepted batches, by model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  // --- generator: tasks --------------------------------------------------------------------
  readonly tasksStarted = new Counter({
    name: 'kiln_tasks_started_total',
    help: 'Task attempts started (claimed) by a generator, by model and provider',
    labelNames: ['model', 'provider'] as const,
    registers: [this.registry],
  });
  readonly tasksSucceeded = new Counter({
    name: 'kiln_tasks_succeeded_total',
    help: 'Tasks that finished with an image, by model and provider',
    labelNames: ['model', 'provider'] as const,
    registers: [this.registry],
  });
  readonly tasksFailed = new Counter({
    name: 'kiln_tasks_failed_total',
    help: 'Tasks that failed for good (and were refunded), by model, provider and error code',
    labelNames: ['model', 'provider', 'error_code'] as const,
    registers: [this.registry],
  });
  readonly taskRetries = new Counter({
    name: 'kiln_task_retries_total',
    help: 'Failed attempts that will be retried, by model, provider and error code',
    labelNames: ['model', 'provider', 'error_code'] as const,
    registers: [this.registry],
  });
  readonly upstreamRateLimited = new Counter({
    name: 'kiln_upstream_rate_limited_total',
    help: 'Upstream answers that said 429 (rate limited), by model and provider',
    labelNames: ['model', 'provider'] as const,
    registers: [this.registry],
  });
  readonly upstreamCancels = new Counter({
    name: 'kiln_upstream_cancels_total',
    help: "Cancels asked of a queue upstream for a cancelled batch's accepted tasks, by model, provider and the upstream's answer (cancelled, runs, unknown, busy)",
    labelNames: ['model', 'provider', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly upstreamCostUsd = new Counter({
    name: 'kiln_upstream_cost_usd_total',
    help: "What succeeded tasks cost upstream in USD, at the route's list price (route cost), by model and provider",
    labelNames: ['model', 'provider'] as const,
    registers: [this.registry],
  });
  readonly upstreamInFlight = new Gauge({
    name: 'kiln_upstream_in_flight',
    help: "This generator's upstream calls in flight, by model (sum over generators for the route's)",
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly upstreamLimit = new Gauge({
    name: 'kiln_upstream_limit',
    help: "The route's current concurrency window (route pacing), at most its maxConcurrency, by model",
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly upstreamSlotWait = new Counter({
    name: 'kiln_upstream_slot_wait_seconds_total',
    help: 'Time upstream calls waited for a slot and for the route pacing (pause, header budget, ratePerMinute), by model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly routeCircuitState = new Gauge({
    name: 'kiln_route_circuit_state',
    help: "A route's circuit as this generator last saw it (0 closed, 1 half-open, 2 open), by model and route (index/type in the chain)",
    labelNames: ['model', 'route'] as const,
    registers: [this.registry],
  });
  readonly routeFailover = new Counter({
    name: 'kiln_route_failover_total',
    help: "Tasks whose next attempt moved to another route of their model's chain, by model, from and to route (index/type) and the failure kind (or circuit_open)",
    labelNames: ['model', 'from', 'to', 'reason'] as const,
    registers: [this.registry],
  });
  readonly routeCircuitFallback = new Counter({
    name: 'kiln_route_circuit_fallback_total',
    help: "Route circuit calls Redis did not answer in time, kept by the generator's own circuit instead",
    registers: [this.registry],
  });
  readonly upstreamPacingFallback = new Counter({
    name: 'kiln_upstream_pacing_fallback_total',
    help: "Route pacing calls Redis did not answer in time, kept by the generator's own limits instead",
    registers: [this.registry],
  });
  readonly renderDuration = new Histogram({
    name: 'kiln_render_duration_seconds',
    help: 'Local (builtin) renders, by model and outcome',
    labelNames: ['model', 'outcome'] as const,
    buckets: TASK_SECONDS,
    registers: [this.registry],
  });
  readonly upstreamDuration = new Histogram({
    name: 'kiln_upstream_duration_seconds',
    help: 'Render calls to upstreams (every route whose type does not render on the CPU), by model, provider and outcome',
    labelNames: ['model', 'provider', 'outcome'] as const,
    buckets: TASK_SECONDS,
    registers: [this.registry],
  });
  readonly refunds = new Counter({
    name: 'kiln_refunds_total',
    help: 'Failed tasks refunded, by model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly creditsRefunded = new Counter({
    name: 'kiln_credits_refunded_total',
    help: 'Credits refunded for failed tasks, by model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  // --- queue (read on scrape by the api) ---------------------------------------------------
  readonly queueJobs = new Gauge({
    name: 'kiln_queue_jobs',
    help: 'Jobs in the task queue by state (waiting, active, delayed, failed)',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly tasksPending = new Gauge({
    name: 'kiln_tasks_pending',
    help: 'Tasks waiting in PostgreSQL for room in the queue (the backlog)',
    registers: [this.registry],
  });
  readonly oldestPendingAge = new Gauge({
    name: 'kiln_oldest_pending_task_age_seconds',
    help: 'Age of the oldest task not yet started (pending or queued); 0 when none',
    registers: [this.registry],
  });
  readonly collectFailures = new Counter({
    name: 'kiln_metrics_collect_failures_total',
    help: 'Scrapes where a gauge could not be read (its source, e.g. Redis, did not answer)',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });

  // --- generator: economy tier (upstream batches; gauges read on scrape) ------------------
  readonly economyUpstreamBatches = new Gauge({
    name: 'kiln_economy_upstream_batches',
    help: 'Open upstream batches of economy tasks, by state (collecting, uploaded, created, ended)',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly economyTasksWaiting = new Gauge({
    name: 'kiln_economy_tasks_waiting',
    help: 'Economy tasks waiting to be gathered into an upstream batch',
    registers: [this.registry],
  });
  readonly economyUpstreamBatchesFormed = new Counter({
    name: 'kiln_economy_upstream_batches_formed_total',
    help: 'Upstream batches of economy tasks formed by this generator, by model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly economyLines = new Counter({
    name: 'kiln_economy_lines_total',
    help: 'Economy tasks ended from their upstream batch by this generator, by model and outcome (succeeded, failed, never_ran, expired)',
    labelNames: ['model', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly webhookDeliveriesDue = new Gauge({
    name: 'kiln_webhook_deliveries_due',
    help: 'Webhook deliveries due and not yet taken by a generator (the delivery backlog)',
    registers: [this.registry],
  });
  readonly webhookDeliveryLag = new Gauge({
    name: 'kiln_webhook_delivery_lag_seconds',
    help: 'How long the oldest due webhook delivery has waited for a generator; 0 when none',
    registers: [this.registry],
  });

  readonly webhookCircuitsOpen = new Gauge({
    name: 'kiln_webhook_circuits_open',
    help: 'Webhook endpoints whose circuit is open (they failed every attempt lately and are left alone for a while)',
    registers: [this.registry],
  });

  // --- generator: webhooks ----------------------------------------------------------------
  readonly webhookCircuitsOpened = new Counter({
    name: 'kiln_webhook_circuit_opened_total',
    help: "Times this generator opened (or, after a failed probe, reopened) an endpoint's circuit",
    registers: [this.registry],
  });
  readonly webhookAttempts = new Counter({
    name: 'kiln_webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts by result (delivered, http_error, network_error)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  // --- api: rate limiting ------------------------------------------------------------------
  readonly rateLimitFallback = new Gauge({
    name: 'kiln_rate_limit_fallback_active',
    help: '1 while Redis does not answer and rate limits are counted in this process alone',
    registers: [this.registry],
  });
  readonly rateLimitFallbackDecisions = new Gauge({
    name: 'kiln_rate_limit_fallback_decisions',
    help: 'Rate-limit decisions taken in this process because Redis did not answer, since start',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** A source read on each scrape (queue depths, fallback state); it must bound its own time. */
  onCollect(collector: () => Promise<void> | void): void {
    this.collectors.add(collector);
  }

  /** The Prometheus text exposition, after every on-demand source had its chance. */
  async render(): Promise<{ contentType: string; body: string }> {
    await Promise.all(
      [...this.collectors].map((collect) =>
        Promise.resolve()
          .then(collect)
          .catch(() => undefined),
      ),
    );
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  onModuleDestroy(): void {
    this.collectors.clear();
    this.registry.clear();
  }
}
