import { Logger } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { BatchStatus, pgError, PreparedStatement, queryPrepared, queryRows, TaskStatus } from '@app/database';
import { BatchChangePublisher } from './batch-changes';
import { tallyAssignments } from './batch-tally';
import { EndedTask, TaskOutcomeHook, TaskOutcomes } from './task-outcome.hook';
import type { TaskView } from './task-rows';

/** A claimed attempt: every later write is conditioned on (status = 'running', attempts = attempt). */
export interface Fence {
  taskId: string;
  attempt: number;
  /** The task's batch: every fenced write locks it first (see FencedWrites). */
  batchId: string;
}

export interface TallyResult {
  status: BatchStatus;
  /** This outcome finished the batch (of a group finishing it together, only one says so). */
  finished: boolean;
  previewUrl: string | null;
}

/** Most items one grouped statement carries; a larger group is split. */
export const MAX_GROUP = 250;
/** Attempts at a statement that PostgreSQL picks as a deadlock's victim. */
const DEADLOCK_ATTEMPTS = 3;

/**
 * The status test of a write that names its tasks (`id = ANY(...)` beside it), written so that
 * PostgreSQL finds them by primary key whatever its statistics say. A plain `t.status =
 * 'running'` matches the partial indexes on status (tasks_unfinished_idx and others); when the
 * statistics are missing or stale (a table never analyzed, or a burst of new tasks that
 * autoanalyze has not seen yet) the planner took such an index as the cheaper path and read
 * every unfinished task to write a dozen: 26 ms a claim with 10,000 queued
 * (test/task-write-plans.e2e-spec.ts, bench/findings.md of 2026-11-27). `|| ''` hides the
 * column from index matching and changes nothing else.
 */
export const statusIs = (alias: string, ...statuses: TaskStatus[]): string =>
  `(${alias}.status || '') IN (${statuses.map((s) => `'${s}'`).join(', ')})`;

/**
 * The lock every grouped write takes first: the batch rows `where` picks, in id order, so
 * two statements locking the same batches cannot deadlock (a cancel locks its one batch the
 * same way). A CTE of the statement; the task updates then keep to `batch_id IN (SELECT id
 * FROM locked)`.
 */
export const lockBatchesInIdOrder = (where: string): string => `SELECT id FROM batches WHERE ${where} ORDER BY id FOR UPDATE`;

/**
 * The batches among `locked` (a CTE of lockBatchesInIdOrder) whose deadline has passed: no
 * task of theirs is sent any more (claim, send), and the deadline sweep cancels what is left
 * unsent (BatchDeadlines). A deadline never changes once set, so the statement's snapshot
 * reads it right; the batch lock orders these writes against the sweep's.
 */
export const overdueBatchesIn = (locked: string): string =>
  `SELECT id FROM batches WHERE id IN (SELECT id FROM ${locked}) AND deadline <= now()`;

/** One task's tally: $1 batch, $2 succeeded, $3 failed, $4 refunded, $5 preview URL or null. */
const TALLY_SQL = `
UPDATE batches SET ${tallyAssignments({ succeeded: '$2', failed: '$3', cancelled: '0', refunded: '$4', preview: '$5::text' })}
WHERE id = $1
RETURNING status, finished_at, preview_url`;

/** The columns of an ended task that its outcome reports (EndedTask), prefixed `ended_`. */
export const ENDED_TASK_COLUMNS = `t.account_id AS ended_account_id, t.seq AS ended_seq, t.prompt AS ended_prompt,
  t.status AS ended_status, t.progress AS ended_progress, t.result_url AS ended_result_url, t.error AS ended_error,
  t.error_code AS ended_error_code, t.result_width AS ended_result_width, t.result_height AS ended_result_height`;

/** A row of a statement that ended tasks: their id and batch, and ENDED_TASK_COLUMNS. */
export interface EndedRow {
  id: string;
  batch_id: string;
  ended_account_id: string;
  ended_seq: number;
  ended_prompt: string;
  ended_status: TaskView['status'];
  ended_progress: number;
  ended_result_url: string | null;
  ended_error: string | null;
  ended_error_code: TaskView['errorCode'];
  ended_result_width: number | null;
  ended_result_height: number | null;
}

export function endedTaskOf(row: EndedRow): EndedTask {
  return {
    accountId: row.ended_account_id,
    task: {
      id: row.id,
      batchId: row.batch_id,
      seq: row.ended_seq,
      prompt: row.ended_prompt,
      status: row.ended_status,
      progress: row.ended_progress,
      resultUrl: row.ended_result_url,
      error: row.ended_error,
      errorCode: row.ended_error_code,
      resultWidth: row.ended_result_width,
      resultHeight: row.ended_result_height,
    },
  };
}

/**
 * What every task transition after creation shares (one file per transition: task-claim,
 * task-send, task-success, task-fail-and-refund, task-requeue, task-cancellation): the connection, the
 * deadlock retry of grouped statements, the batch tally, the outbox, and the announcement of
 * the batches a committed write changed.
 *
 * The rules every transition keeps: a write after the claim is fenced on (status = 'running',
 * attempts = attempt); it locks the task's batch row before the task row (grouped statements
 * lock their batches in id order), so a cancel racing it waits instead of deadlocking; it
 * bumps the batch's version and, once committed, announces the batch (BatchChangePublisher)
 * for held long polls.
 */
export class FencedWrites {
  readonly logger = new Logger('TaskStateStore');

  constructor(
    readonly db: DataSource,
    private readonly changes: BatchChangePublisher,
    private readonly outcomes: TaskOutcomeHook | null,
  ) {}

  /** A grouped statement, prepared once per connection, retried when picked as a deadlock's victim. */
  grouped<T extends object>(statement: PreparedStatement, params: unknown[]): Promise<T[]> {
    return retryingDeadlocks(() => queryPrepared<T>(this.db, statement, params));
  }

  /** One transaction of one batch's writes; the batch is announced when it changed something (a truthy result). */
  async inTransaction<T>(batchId: string, write: (m: EntityManager) => Promise<T>): Promise<T> {
    const result = await this.db.transaction(write);
    if (result) this.announce([batchId]);
    return result;
  }

  announce(batchIds: Iterable<string>): void {
    this.changes.announce(batchIds);
  }

  /** Batches a committed write finished: announced at once (BatchChangePublisher.announceFinished). */
  announceFinished(batchIds: Iterable<string>): void {
    this.changes.announceFinished(batchIds);
  }

  /** Whether anyone listens to the outcomes of these batches (TaskOutcomeHook.listening). */
  async listening(batchIds: readonly string[]): Promise<boolean> {
    return this.outcomes !== null && (await this.outcomes.listening(this.db, batchIds));
  }

  /** Records outcomes in `m` for a write that found someone listening (listening above). */
  async record(m: EntityManager, outcomes: TaskOutcomes): Promise<void> {
    await this.outcomes?.record(m, outcomes);
  }

  /**
   * Outcomes of a write made in `m` (a failure, a recount, and any later writer such as a
   * cancel that finishes batches): into the outbox, in the same transaction, when anyone
   * listens.
   */
  async recordOutcomes(m: EntityManager, batchIds: readonly string[], outcomes: TaskOutcomes): Promise<void> {
    if (!this.outcomes || (outcomes.ended.length === 0 && outcomes.finishedBatchIds.length === 0)) return;
    if (!(await this.outcomes.listening(m, batchIds))) return;
    await this.outcomes.record(m, outcomes);
  }

  /** Counts one task's end into its batch (tallyAssignments), in the task write's transaction. */
  async tally(
    m: EntityManager,
    batchId: string,
    delta: { succeeded: number; failed: number; refunded: number; previewUrl: string | null },
  ): Promise<TallyResult> {
    const [row] = await queryRows<{ status: BatchStatus; finished_at: Date | null; preview_url: string | null }>(m, TALLY_SQL, [
      batchId,
      delta.succeeded,
      delta.failed,
      delta.refunded,
      delta.previewUrl,
    ]);
    return { status: row.status, finished: row.finished_at !== null, previewUrl: row.preview_url };
  }
}

/**
 * Grouped statements lock rows of many tasks; a duplicate delivery on another replica can
 * lock the same rows in another order. PostgreSQL then rolls one statement back, which is
 * safe to run again.
 */
export async function retryingDeadlocks<T>(statement: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await statement();
    } catch (err) {
      if (attempt >= DEADLOCK_ATTEMPTS || !isDeadlock(err)) throw err;
    }
  }
}

/** PostgreSQL picked the statement as a deadlock's victim (and rolled it back). */
function isDeadlock(err: unknown): boolean {
  return pgError(err).code === '40P01';
}
