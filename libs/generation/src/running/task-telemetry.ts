import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ENV_REPORT_INTERVAL_MS, RouteHealthStore, RouteOutcome } from '@app/catalog';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { KilnMetrics } from '@app/metrics';
import { isProviderError, metricsLabel, type ProviderRoute, rendersOnCpu, routeLabel } from '@app/providers';
import { ClaimedTask } from '@app/tasks';
import { classifyFailure, countsAgainstRoute, describeError } from './task-failure';

/** One route outcome per model reaches Redis at most this often, unless the state changes. */
const OUTCOME_REPORT_INTERVAL_MS = 5000;

/**
 * Why an attempt failed, as a metric label and a log field: the task's own errorCode
 * (upstream_rejected, upstream_unavailable, provider_not_configured, internal), the vocabulary
 * clients see on the task.
 */
export function failureCode(err: unknown): string {
  return classifyFailure(err).code;
}

/** The provider error's own kind (rate_limited, timeout, bad_request, ...), for logs; null otherwise. */
export function upstreamKind(err: unknown): string | null {
  return isProviderError(err) ? err.kind : null;
}

type Finished = 'succeeded' | 'failed';

/**
 * What a generator tells operators about its tasks: the metrics (kiln_tasks_*, kiln_render_*,
 * kiln_upstream_*, refunds), one `info` line per finished task, a `warn` per upstream failure,
 * an `error` once per model whose route is not configured, and each model's last outcome in
 * Redis for GET /v1/admin/models.
 */
@Injectable()
export class TaskTelemetry {
  private readonly logger = new Logger('Tasks');
  private readonly notConfiguredTold = new Set<string>();
  private readonly lastReported = new Map<string, { ok: boolean; at: number }>();

  constructor(
    private readonly metrics: KilnMetrics,
    private readonly routeHealth: RouteHealthStore,
  ) {}

  started(claim: ClaimedTask): void {
    if (!claim.batch) return;
    this.metrics.tasksStarted.inc({ model: claim.batch.model, provider: metricsLabel(claim.batch.provider) });
  }

  /** One render call's time: local types (builtin) are CPU work, the others upstream calls. */
  rendered(claim: ClaimedTask, seconds: number, ok: boolean): void {
    if (!claim.batch) return;
    const { model, provider } = claim.batch;
    const outcome = ok ? 'ok' : 'error';
    if (rendersOnCpu(provider)) this.metrics.renderDuration.observe({ model, outcome }, seconds);
    else this.metrics.upstreamDuration.observe({ model, provider: metricsLabel(provider), outcome }, seconds);
  }

  /** A failed attempt, retried or not: the metrics and the warn or error line it deserves. */
  attemptFailed(claim: ClaimedTask, err: unknown, retrying: boolean): void {
    const model = claim.batch?.model ?? 'unknown';
    const provider = claim.batch ? metricsLabel(claim.batch.provider) : 'unknown';
    const code = failureCode(err);
    if (retrying) this.metrics.taskRetries.inc({ model, provider, error_code: code });
    if (isProviderError(err) && err.status === 429) this.metrics.upstreamRateLimited.inc({ model, provider });
    if (code === 'provider_not_configured') {
      // Every task on the model fails the same way: one line says it, the metrics count the rest.
      if (!this.notConfiguredTold.has(model)) {
        this.notConfiguredTold.add(model);
        this.logger.error({ model, provider, errorCode: code, msg: `Model ${model} cannot render: ${(err as Error).message}` });
      }
      return;
    }
    if (isProviderError(err) && claim.batch) {
      this.logger.warn({
        taskId: claim.id,
        model,
        provider,
        route: routeLabel(claim.batch.provider),
        status: err.status ?? null,
        errorCode: code,
        upstreamKind: err.kind,
        attempt: claim.attempts,
        retrying,
        msg: `Upstream failure on ${model}: ${err.message}`,
      });
    }
  }

  /** What a recorded success cost upstream (kiln_upstream_cost_usd_total; operators only); null: unpriced, nothing to add. */
  upstreamCost(claim: ClaimedTask, micros: number | null): void {
    if (micros === null || micros <= 0 || !claim.batch) return;
    this.metrics.upstreamCostUsd.inc({ model: claim.batch.model, provider: metricsLabel(claim.batch.provider) }, micros / 1_000_000);
  }

  /** The task is done for good (this attempt was its last): one line, the counters, route health. */
  finished(claim: ClaimedTask, outcome: Finished, startedAt: number, details: { err?: unknown; refunded?: number } = {}): void {
    const model = claim.batch?.model ?? 'unknown';
    const provider = claim.batch ? metricsLabel(claim.batch.provider) : 'unknown';
    const errorCode = details.err === undefined ? null : failureCode(details.err);
    if (outcome === 'succeeded') {
      this.metrics.tasksSucceeded.inc({ model, provider });
    } else {
      this.metrics.tasksFailed.inc({ model, provider, error_code: errorCode ?? 'unknown' });
      if (details.refunded) {
        this.metrics.refunds.inc({ model });
        this.metrics.creditsRefunded.inc({ model }, details.refunded);
      }
    }
    this.logger.log({
      taskId: claim.id,
      batchId: claim.batchId,
      model,
      provider,
      attempts: claim.attempts,
      durationMs: Date.now() - startedAt,
      outcome,
      errorCode,
      msg: `Task ${outcome}`,
    });
    if (claim.batch) this.reportOutcome(model, claim.batch.provider, outcome === 'succeeded', details.err);
  }

  /** A failure that is not the route's own (countsAgainstRoute) leaves its health as it was. */
  private reportOutcome(model: string, route: ProviderRoute, ok: boolean, err: unknown): void {
    if (!ok && !countsAgainstRoute(err)) return;
    const now = Date.now();
    const reported = `${model} ${routeLabel(route)}`;
    const last = this.lastReported.get(reported);
    if (last && last.ok === ok && now - last.at < OUTCOME_REPORT_INTERVAL_MS) return;
    this.lastReported.set(reported, { ok, at: now });
    const outcome: RouteOutcome = { ok, at: new Date(now).toISOString() };
    if (!ok) {
      outcome.error = err instanceof Error ? err.message : String(err);
      outcome.errorCode = failureCode(err);
      if (isProviderError(err) && err.status) outcome.status = err.status;
    }
    this.routeHealth
      .reportOutcome(model, route, outcome)
      .catch((e) => this.logger.debug?.(`Route health not reported: ${describeError(e)}`));
  }
}

/**
 * The generator's heartbeat in Redis: the names of the upstream keys it holds (never their
 * values), so the api can tell which routes no generator could use.
 */
@Injectable()
export class GeneratorEnvReporter implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('RouteHealth');
  readonly instance = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly routeHealth: RouteHealthStore,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  envNames(): string[] {
    return Object.keys(this.config.providerApiKeys ?? {});
  }

  async report(): Promise<void> {
    await this.routeHealth.reportEnv(this.instance, this.envNames());
  }

  onApplicationBootstrap(): void {
    const tick = () => void this.report().catch((err) => this.logger.debug?.(`Not reported: ${describeError(err)}`));
    tick();
    this.timer = setInterval(tick, ENV_REPORT_INTERVAL_MS);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.routeHealth.forgetGenerator(this.instance).catch(() => undefined);
  }
}
