import { Inject, Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BillingService } from '@app/billing';
import { BatchStatus, TaskErrorCode } from '@app/database';
import { BatchChangePublisher } from './batch-changes';
import { BatchRoute, BatchRoutes } from './batch-route';
import { Fence, FencedWrites, TallyResult } from './fenced-write';
import { ClaimedTask, TaskClaims } from './task-claim';
import { FailResult, Failure, TaskFailures } from './task-fail-and-refund';
import { TASK_OUTCOME_HOOK, TaskOutcomeHook, TaskOutcomes } from './task-outcome.hook';
import { RequeueOutcome, TaskRequeues } from './task-requeue';
import { TaskSends } from './task-send';
import { Success, TaskSuccesses } from './task-success';
import { moveTaskToRoute } from './task-route';

/**
 * Task state after creation, one transition per file around one fenced-write helper
 * (fenced-write.ts, which states the rules every transition keeps): the claim (task-claim),
 * the send and progress (task-send), success (task-success), failure and its refund
 * (task-fail-and-refund), the give-back for a retry and the recount of a lost tally (task-requeue);
 * the cancel is task-cancellation. This class is what the generator injects: it only hands
 * each call to its transition. A new task state is a new file and a line here.
 */
@Injectable()
export class TaskStateStore {
  private readonly writes: FencedWrites;
  private readonly claims: TaskClaims;
  private readonly sends: TaskSends;
  private readonly successes: TaskSuccesses;
  private readonly failures: TaskFailures;
  private readonly requeues: TaskRequeues;
  private readonly routes: BatchRoutes;
  private readonly db: DataSource;

  constructor(
    @InjectDataSource() db: DataSource,
    billing: BillingService,
    changes: BatchChangePublisher,
    @Optional() @Inject(TASK_OUTCOME_HOOK) outcomes: TaskOutcomeHook | null = null,
  ) {
    this.writes = new FencedWrites(db, changes, outcomes);
    this.claims = new TaskClaims(this.writes);
    this.sends = new TaskSends(this.writes);
    this.successes = new TaskSuccesses(this.writes);
    this.failures = new TaskFailures(this.writes, billing);
    this.requeues = new TaskRequeues(this.writes, billing);
    this.routes = new BatchRoutes(db);
    this.db = db;
  }

  /** moveTaskToRoute: the task's next attempt goes to another route of its batch's chain. */
  moveToRoute(fence: Fence, routeIndex: number): Promise<boolean> {
    return moveTaskToRoute(this.db, fence, routeIndex);
  }

  /** TaskClaims.claim */
  claim(taskId: string): Promise<ClaimedTask | null> {
    return this.claims.claim(taskId);
  }

  /** BatchRoutes.of: the batch's model and provider snapshot, read once per batch. */
  batchRoute(batchId: string): Promise<BatchRoute | null> {
    return this.routes.of(batchId);
  }

  /** TaskClaims.claimAndSend */
  claimAndSend(taskId: string, batchId: string): Promise<ClaimedTask | null> {
    return this.claims.claimAndSend(taskId, batchId);
  }

  /** TaskSends.send */
  send(fence: Fence): Promise<boolean> {
    return this.sends.send(fence);
  }

  /** TaskSends.reportProgress: never throws. */
  reportProgress(fence: Fence, pct: number): Promise<void> {
    return this.sends.reportProgress(fence, pct);
  }

  /** TaskSuccesses.succeed */
  succeed(success: Success): Promise<TallyResult | null> {
    return this.successes.succeed(success);
  }

  /** TaskFailures.fail */
  fail(fence: Fence, message: string, code: TaskErrorCode, upstreamCostMicros: number | null = 0): Promise<FailResult | null> {
    return this.failures.fail(fence, message, code, upstreamCostMicros);
  }

  /** TaskFailures.failMany */
  failMany(failures: readonly Failure[]): Promise<(FailResult | null)[]> {
    return this.failures.failMany(failures);
  }

  /** TaskRequeues.requeue */
  requeue(fence: Fence): Promise<RequeueOutcome> {
    return this.requeues.requeue(fence);
  }

  /** TaskRequeues.finishFromTasks */
  finishFromTasks(batchId: string): Promise<BatchStatus | null> {
    return this.requeues.finishFromTasks(batchId);
  }

  /** FencedWrites.recordOutcomes */
  recordOutcomes(m: EntityManager, batchIds: readonly string[], outcomes: TaskOutcomes): Promise<void> {
    return this.writes.recordOutcomes(m, batchIds, outcomes);
  }
}
