import type { DataSource, EntityManager } from 'typeorm';
import type { TaskView } from './task-rows';

/**
 * Injection token of the optional TaskOutcomeHook. The webhooks lib provides it (globally)
 * so the task writes below can put their events in the outbox without this lib knowing
 * about webhooks.
 */
export const TASK_OUTCOME_HOOK = Symbol('TASK_OUTCOME_HOOK');

/** A task that has just ended, as it now reads, and its account. */
export interface EndedTask {
  accountId: string;
  task: TaskView;
}

/** What one write (a group of successes, a failure, a recount) changed for good. */
export interface TaskOutcomes {
  ended: EndedTask[];
  /** Batches this write made done; their rows already carry the final counts and status. */
  finishedBatchIds: string[];
}

/**
 * Told about every terminal change to tasks and batches, inside the transaction that makes
 * it, so what it writes commits or rolls back with the change itself (an outbox).
 */
export interface TaskOutcomeHook {
  /**
   * Whether any account owning these batches listens at all: one cheap read before the
   * write, so that a pipeline nobody listens to keeps its single-statement group commits.
   */
  listening(m: DataSource | EntityManager, batchIds: readonly string[]): Promise<boolean>;
  /** Records the outcomes, in the transaction `m` of their writes. */
  record(m: EntityManager, outcomes: TaskOutcomes): Promise<void>;
}
