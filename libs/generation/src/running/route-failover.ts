import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { abortReason } from '@app/errors';
import { KilnMetrics } from '@app/metrics';
import {
  FailoverKind,
  failoverOf,
  FailoverSettings,
  isProviderError,
  pairsRouteCannotMake,
  ProviderError,
  ProviderRoute,
} from '@app/providers';
import { ClaimedTask, Fence, RenderBatch, TaskStateStore } from '@app/tasks';
import { CircuitRoute, RouteCircuit, routeMetricsLabel } from '../limits/route-circuit';
import { describeError } from './task-failure';

/** While every route of a chain is open, a task asks again at least this often (a probe may close one meanwhile). */
const ALL_OPEN_RECHECK_MS = 2000;

/**
 * The failover kind of an attempt's failure, or null when the failure is not the route's own
 * (a content refusal, a request the upstream refused as invalid, an unsupported size, Kiln's
 * own trouble): those fail the task as they always have and never move it. 429s Kiln caused
 * are retried by the pacer and never get here; a 429 that does is the upstream's limit.
 */
export function failoverKind(err: unknown): FailoverKind | null {
  if (!isProviderError(err)) return null;
  switch (err.kind) {
    case 'rate_limited':
      return 'rate_limited';
    case 'timeout':
      return 'timeout';
    case 'invalid_response':
      return 'server_error';
    case 'upstream_error':
      if (err.status === undefined) return 'connection';
      return err.status >= 500 ? 'server_error' : null;
    default:
      return null;
  }
}

/** The chain a batch rides on when it has more than one route; null when it has one (no failover, no circuit). */
export function chainOf(batch: Pick<RenderBatch, 'routes'> | null): ProviderRoute[] | null {
  return batch?.routes && batch.routes.length > 1 ? batch.routes : null;
}

/**
 * Failover along a batch's chain of routes (docs/providers.md "A chain of routes"): which
 * route an attempt goes to (the task's own, or the next whose circuit admits it) and where the
 * next attempt goes after a failure of a failover kind. Batches of one route never get here.
 */
@Injectable()
export class RouteFailover {
  private readonly logger = new Logger('RouteFailover');
  /** Claims this generator sent as their route's probe (the answer closes or re-opens it). */
  private readonly probes = new WeakSet<ClaimedTask>();
  /** Failed claims whose failover a queue request's forget already carried (failedRequest): failed() leaves them. */
  private readonly decided = new WeakSet<ClaimedTask>();

  constructor(
    private readonly store: TaskStateStore,
    private readonly circuit: RouteCircuit,
    private readonly metrics: KilnMetrics,
  ) {}

  /**
   * The claim as this attempt runs it: on the task's route if its circuit admits the task,
   * else on the next route of the chain that does (the task is moved there); while none
   * does, the attempt waits for the soonest to let a probe through. A task with a queue
   * upstream's request recorded is resumed where it was sent, never sent elsewhere.
   */
  async choose(claim: ClaimedTask, fence: Fence, signal: AbortSignal): Promise<ClaimedTask> {
    const batch = claim.batch;
    const chain = chainOf(batch);
    if (!batch || !chain || claim.upstream) return claim;
    const settings = failoverOf(batch.failover);
    const order = this.candidates(chain, batch, settings, claim.routeIndex);
    for (;;) {
      let soonest = Infinity;
      for (const index of order) {
        const verdict = await this.circuit.admit(this.at(batch, index), settings);
        if (!verdict.go) {
          soonest = Math.min(soonest, verdict.waitMs);
          continue;
        }
        if (index !== claim.routeIndex) {
          if (!(await this.store.moveToRoute(fence, index))) return claim;
          this.counted(batch, claim.routeIndex, index, 'circuit_open');
        }
        const chosen: ClaimedTask = { ...claim, routeIndex: index, batch: { ...batch, provider: chain[index] } };
        if (verdict.probe) this.probes.add(chosen);
        return chosen;
      }
      await sleep(Math.max(50, Math.min(soonest, ALL_OPEN_RECHECK_MS)), undefined, { signal }).catch(() => {
        throw abortReason(signal);
      });
    }
  }

  /**
   * An attempt failed. A failure of a failover kind counts against its route's circuit; when
   * the task is retried (`retrying`) and the kind is in the batch's `on`, its next attempt goes
   * to the next route that can make its pair (after the last, the first again: the budget of
   * attempts spans the chain). Never throws: failover is best effort, the retry happens anyway.
   */
  async failed(claim: ClaimedTask, fence: Fence, err: unknown, retrying: boolean): Promise<void> {
    if (this.decided.has(claim)) return;
    const next = await this.nextRoute(claim, err, retrying);
    if (next === null) return;
    try {
      if (await this.store.moveToRoute(fence, next)) this.moved(claim, next, err);
    } catch (e) {
      this.logger.warn(`Task ${claim.id}: failover after a failed attempt not recorded (${describeError(e)})`);
    }
  }

  /**
   * A queue upstream's request failed (the upstream's own answer) and the task is retried: the
   * failure counted as failed() counts it, and the route its next attempt goes to returned
   * (null: it stays), for the request's forget to carry in the same write
   * (UpstreamWaitStore.forget); moved() then counts the move, and failed() does nothing more.
   */
  async failedRequest(claim: ClaimedTask, err: unknown): Promise<number | null> {
    const next = await this.nextRoute(claim, err, true);
    this.decided.add(claim);
    return next;
  }

  /** The metric of a move failedRequest decided, once its write is done. */
  moved(claim: ClaimedTask, to: number, err: unknown): void {
    const kind = failoverKind(err);
    if (claim.batch && chainOf(claim.batch) && kind) this.counted(claim.batch, claim.routeIndex, to, kind);
  }

  /** The failure counted against its route's circuit, and the next route when it fails over (null: it stays). Never throws. */
  private async nextRoute(claim: ClaimedTask, err: unknown, retrying: boolean): Promise<number | null> {
    const batch = claim.batch;
    const chain = chainOf(batch);
    const kind = failoverKind(err);
    if (!batch || !chain || !kind) return null;
    try {
      const settings = failoverOf(batch.failover);
      await this.circuit.record(this.at(batch, claim.routeIndex), settings, 'failure', this.probes.has(claim));
      if (!retrying || !settings.on.includes(kind)) return null;
      return this.candidates(chain, batch, settings, claim.routeIndex)[1] ?? null;
    } catch (e) {
      this.logger.warn(`Task ${claim.id}: failover after a failed attempt not recorded (${describeError(e)})`);
      return null;
    }
  }

  /**
   * Right before a chain's task calls its upstream (within its slot: a render, or a queue
   * upstream's submit while no submit intent of the task is recorded): a route this generator
   * has seen open since the task was admitted is not called; the attempt fails as the route
   * would (server_error), so the task moves on to the next route.
   */
  beforeCall(claim: ClaimedTask): void {
    const batch = claim.batch;
    if (!batch || !chainOf(batch) || this.probes.has(claim)) return;
    if (this.circuit.seenOpen(this.at(batch, claim.routeIndex))) {
      throw new ProviderError('upstream_error', "The route's circuit opened while the task waited for it; trying the next route", {
        status: 503,
      });
    }
  }

  /** An attempt succeeded: its route's circuit hears it (a probe's success closes it). Never throws. */
  async succeeded(claim: ClaimedTask): Promise<void> {
    const batch = claim.batch;
    if (!batch || !chainOf(batch)) return;
    try {
      await this.circuit.record(this.at(batch, claim.routeIndex), failoverOf(batch.failover), 'ok', this.probes.has(claim));
    } catch (e) {
      this.logger.warn(`Task ${claim.id}: a route's success not recorded (${describeError(e)})`);
    }
  }

  /**
   * The routes a task may go to, its own first, then the rest in chain order after it and
   * around: those that can make its pair (with failover.sizes 'primary' a fallback may not).
   */
  private candidates(chain: ProviderRoute[], batch: RenderBatch, settings: FailoverSettings, from: number): number[] {
    const start = Math.min(Math.max(0, from), chain.length - 1);
    const order = chain.map((_, i) => (start + i) % chain.length);
    if (settings.sizes !== 'primary') return order;
    const pair = { [batch.aspectRatio]: [batch.resolution as '1K'] };
    return order.filter((i) => i === 0 || i === start || pairsRouteCannotMake(chain[i], pair).length === 0);
  }

  private at(batch: RenderBatch, index: number): CircuitRoute {
    return { model: batch.model, index, route: chainOf(batch)![index] };
  }

  private counted(batch: RenderBatch, from: number, to: number, reason: string): void {
    const chain = chainOf(batch)!;
    this.metrics.routeFailover.inc({
      model: batch.model,
      from: routeMetricsLabel(from, chain[from]),
      to: routeMetricsLabel(to, chain[to]),
      reason,
    });
  }
}
