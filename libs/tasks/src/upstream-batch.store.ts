import { Inject, Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { BillingService } from '@app/billing';
import { ProviderRoute, queryRows, UpstreamBatchState } from '@app/database';
import { BatchChangePublisher } from './batch-changes';
import { FencedWrites } from './fenced-write';
import { ClaimedTask, claimedTaskOf, ClaimedTaskRow, RenderBatch, RenderBatchRow, renderBatchOf } from './task-claim';
import { TaskEconomyExpiry } from './task-economy-expiry';
import { FormedGroup, moveEconomyTasksToRoute, TaskEconomySubmits } from './task-economy-submit';
import { TASK_OUTCOME_HOOK, TaskOutcomeHook } from './task-outcome.hook';

/** An upstream batch's row, as the collector works on it. */
export interface UpstreamGroup {
  id: string;
  model: string;
  provider: ProviderRoute;
  state: UpstreamBatchState;
  lines: number;
  inputId: string | null;
  upstreamBatchId: string | null;
  upstreamState: Record<string, string> | null;
  found: Record<string, string> | null;
  outcome: string | null;
  upstreamStatus: string | null;
  tries: number;
}

/**
 * Open economy batches of one model and chain, with waiting tasks: what the collector gathers
 * them from. `routes` is the batches' chain (null: their provider alone).
 */
export interface EconomyBatches {
  model: string;
  provider: ProviderRoute;
  routes: ProviderRoute[] | null;
  batchIds: string[];
}

/**
 * Which waiting economy tasks a route of a chain takes: those whose route_index is in
 * [fromIndex, index] (the route at `index` is the first that runs batches from fromIndex on).
 */
export interface EconomyRouteRange {
  index: number;
  fromIndex: number;
}

/** A waiting economy task, with what its line needs. */
export interface WaitingEconomyTask extends ClaimedTask {
  createdAt: Date;
}

/**
 * A task's own columns. Its batch's (the same for up to 10,000 tasks of a group) are read once
 * per batch (BATCH_SNAPSHOT_COLUMNS) and shared, not carried on every row: a 10,000-row read
 * with the batch's columns, its provider snapshot parsed on each, made the generator's heap
 * hold and then collect 10,000 copies per read (bench/findings.md, 2026-11-25 economy memory).
 */
const TASK_COLUMNS = `t.id, t.batch_id, t.account_id, t.seq, t.prompt, t.seed, t.ref_upload_ids, t.attempts, t.result_token, t.created_at, t.route_index`;

/** A task's batch's snapshot under the names a CLAIM_GROUP row gives it (renderBatchOf reads either). */
const BATCH_SNAPSHOT_COLUMNS = `b.id AS batch_id, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.output_format, b.provider,
       b.routes, b.failover,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background`;

/** A row of TASK_COLUMNS. */
interface EconomyTaskRow extends ClaimedTaskRow {
  created_at: Date;
}

const GROUP_COLUMNS = `id, model, provider, state, lines, input_id, upstream_batch_id, upstream_state, found, outcome, upstream_status, tries`;

/** A row of GROUP_COLUMNS. */
interface GroupRow {
  id: string;
  model: string;
  provider: ProviderRoute;
  state: UpstreamBatchState;
  lines: number;
  input_id: string | null;
  upstream_batch_id: string | null;
  upstream_state: Record<string, string> | null;
  found: Record<string, string> | null;
  outcome: string | null;
  upstream_status: string | null;
  tries: number;
}

function groupOf(row: GroupRow): UpstreamGroup {
  return {
    id: row.id,
    model: row.model,
    provider: row.provider,
    state: row.state,
    lines: row.lines,
    inputId: row.input_id,
    upstreamBatchId: row.upstream_batch_id,
    upstreamState: row.upstream_state,
    found: row.found,
    outcome: row.outcome,
    upstreamStatus: row.upstream_status,
    tries: row.tries,
  };
}

/**
 * The economy tier's upstream batches (the upstream_batches table) and the task moves that go
 * with them: the submit of a group (task-economy-submit), the window's end (task-economy-expiry).
 * A group's successes and failures are the ordinary ones (TaskStateStore.succeed / fail).
 *
 * Every step of a group is recorded before the next is taken (spec section 2), and each write
 * is fenced on the poller that holds the group's lease: a generator whose lease ran out (and
 * whose group another took) changes nothing. Between steps nobody holds a group; the one due
 * (poll_at) is leased by whichever generator's collector asks first.
 */
@Injectable()
export class UpstreamBatchStore {
  private readonly writes: FencedWrites;
  private readonly submits: TaskEconomySubmits;
  private readonly expiry: TaskEconomyExpiry;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    billing: BillingService,
    changes: BatchChangePublisher,
    @Optional() @Inject(TASK_OUTCOME_HOOK) outcomes: TaskOutcomeHook | null = null,
  ) {
    this.writes = new FencedWrites(db, changes, outcomes);
    this.submits = new TaskEconomySubmits(this.writes);
    this.expiry = new TaskEconomyExpiry(this.writes, billing);
  }

  /** Open economy batches with waiting tasks, by model and routing snapshot (provider and chain). */
  async economyRoutes(): Promise<EconomyBatches[]> {
    const rows = await queryRows<{ model: string; provider: ProviderRoute; routes: ProviderRoute[] | null; batch_ids: string[] }>(
      this.db,
      `SELECT b.model, b.provider, b.routes, array_agg(b.id ORDER BY b.created_at) AS batch_ids
         FROM batches b
        WHERE b.tier = 'economy' AND b.finished_at IS NULL AND b.cancelled_at IS NULL
          AND EXISTS (SELECT 1 FROM tasks t WHERE t.batch_id = b.id AND t.status = 'pending' AND t.tier = 'economy')
        GROUP BY b.model, b.provider, b.routes`,
    );
    return rows.map((r) => ({ model: r.model, provider: r.provider, routes: r.routes, batchIds: r.batch_ids }));
  }

  /**
   * The oldest waiting economy tasks of these batches, up to `limit`, with what their lines
   * need; of a chain, only those the route of `range` takes.
   */
  async waitingTasks(batchIds: readonly string[], limit: number, range?: EconomyRouteRange): Promise<WaitingEconomyTask[]> {
    const rows = await queryRows<EconomyTaskRow>(
      this.db,
      `SELECT ${TASK_COLUMNS}
         FROM tasks t
        WHERE t.batch_id = ANY($1::uuid[]) AND t.status = 'pending' AND t.tier = 'economy' AND t.upstream_batch_id IS NULL
          ${range ? 'AND t.route_index BETWEEN $3 AND $4' : ''}
        ORDER BY t.created_at, t.id
        LIMIT $2`,
      range ? [batchIds, limit, range.fromIndex, range.index] : [batchIds, limit],
    );
    const batches = await this.batchSnapshots(rows);
    // A task whose batch row is gone is left out, as the join with batches did.
    return rows
      .filter((row) => batches.get(row.batch_id))
      .map((row) => ({ ...claimedTaskOf(row, batches.get(row.batch_id, row.route_index)), createdAt: new Date(row.created_at) }));
  }

  /** TaskEconomySubmits.formGroup */
  formGroup(
    route: { model: string; provider: object; index?: number },
    taskIds: readonly string[],
    hold: { poller: string; leaseMs: number },
  ): Promise<FormedGroup | null> {
    return this.submits.formGroup(route, taskIds, hold);
  }

  /** moveEconomyTasksToRoute: the tasks go back to `pending` on another route of their chain. */
  moveToRoute(groupId: string, tasks: readonly { id: string; attempts: number }[], routeIndex: number): Promise<string[]> {
    return moveEconomyTasksToRoute(this.writes, groupId, tasks, routeIndex);
  }

  /**
   * The group's tasks still `running` in it (not yet ended), each with its fence (attempts);
   * only those of `ids` when given. Tasks of one batch share one batch object (null if the
   * batch row is gone).
   */
  async runningTasks(groupId: string, ids?: readonly string[]): Promise<ClaimedTask[]> {
    const rows = await queryRows<EconomyTaskRow>(
      this.db,
      `SELECT ${TASK_COLUMNS}
         FROM tasks t
        WHERE t.upstream_batch_id = $1 AND t.status = 'running' ${ids ? 'AND t.id = ANY($2::uuid[])' : ''}
        ORDER BY t.batch_id, t.seq`,
      ids ? [groupId, ids] : [groupId],
    );
    const batches = await this.batchSnapshots(rows);
    return rows.map((row) => claimedTaskOf(row, batches.get(row.batch_id, row.route_index) ?? null));
  }

  /** The ids of the group's tasks still `running` in it: what its upload needs when the lines are already made. */
  async runningTaskIds(groupId: string): Promise<string[]> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `SELECT t.id FROM tasks t WHERE t.upstream_batch_id = $1 AND t.status = 'running' ORDER BY t.batch_id, t.seq`,
      [groupId],
    );
    return rows.map((r) => r.id);
  }

  /**
   * The batches of these task rows, each read once, as what a render needs of them: on a
   * chain, one object per batch and route (`provider` the task's route, routes[route_index]),
   * shared by the tasks on it.
   */
  private async batchSnapshots(
    rows: readonly ClaimedTaskRow[],
  ): Promise<{ get(batchId: string, routeIndex?: number): RenderBatch | undefined }> {
    const ids = [...new Set(rows.map((r) => r.batch_id))];
    const found = ids.length
      ? await queryRows<RenderBatchRow>(
          this.db,
          `SELECT ${BATCH_SNAPSHOT_COLUMNS} FROM batches b LEFT JOIN models m ON m.key = b.model WHERE b.id = ANY($1::uuid[])`,
          [ids],
        )
      : [];
    const batches = new Map(found.map((row) => [row.batch_id, renderBatchOf(row)]));
    const onRoute = new Map<string, RenderBatch>();
    return {
      get(batchId, routeIndex = 0) {
        const batch = batches.get(batchId);
        const route = batch?.routes?.[routeIndex];
        if (!batch || !route || routeIndex === 0) return batch;
        const key = `${batchId}/${routeIndex}`;
        let shared = onRoute.get(key);
        if (!shared) onRoute.set(key, (shared = { ...batch, provider: route }));
        return shared;
      },
    };
  }

  /** Up to `limit` groups due (poll_at passed) that nobody holds, leased to `poller`. */
  async leaseDue(poller: string, leaseMs: number, limit: number): Promise<UpstreamGroup[]> {
    if (limit <= 0) return [];
    const rows = await queryRows<GroupRow>(
      this.db,
      `WITH due AS (
         SELECT id FROM upstream_batches
          WHERE state NOT IN ('read', 'failed') AND poll_at <= now() AND (lease_until IS NULL OR lease_until < now())
          ORDER BY poll_at LIMIT $3 FOR UPDATE SKIP LOCKED
       )
       UPDATE upstream_batches u SET poller = $1, lease_until = now() + $2::int * interval '1 millisecond', updated_at = now()
         FROM due WHERE u.id = due.id
       RETURNING ${GROUP_COLUMNS.split(', ')
         .map((c) => `u.${c}`)
         .join(', ')}`,
      [poller, leaseMs, limit],
    );
    return rows.map(groupOf);
  }

  /** Extends the lease while a long step runs (reading 10,000 results); false when another holds the group now. */
  async renew(groupId: string, poller: string, leaseMs: number): Promise<boolean> {
    return this.fenced(groupId, poller, `lease_until = now() + $3::int * interval '1 millisecond'`, [leaseMs]);
  }

  /** Step 1 done: the input's id, recorded before the create. */
  recordInput(groupId: string, poller: string, inputId: string): Promise<boolean> {
    return this.fenced(
      groupId,
      poller,
      `input_id = $3, state = 'uploaded', tries = 0, last_error = NULL`,
      [inputId],
      `state = 'collecting'`,
    );
  }

  /** Step 2 done (or found again): the upstream batch id, recorded before any wait; the group is let go until pollAt. */
  recordCreated(groupId: string, poller: string, ref: { batchId: string; state: Record<string, string> }, pollAt: Date): Promise<boolean> {
    return this.fenced(
      groupId,
      poller,
      `upstream_batch_id = $3, upstream_state = $4::jsonb, state = 'created', tries = 0, last_error = NULL, poll_at = $5, poller = NULL, lease_until = NULL`,
      [ref.batchId, JSON.stringify(ref.state), pollAt],
      `state IN ('collecting', 'uploaded')`,
    );
  }

  /** A poll answered waiting: let go until pollAt. */
  recordWaiting(groupId: string, poller: string, upstreamStatus: string, pollAt: Date): Promise<boolean> {
    return this.fenced(groupId, poller, `upstream_status = $3, tries = 0, poll_at = $4, poller = NULL, lease_until = NULL`, [
      upstreamStatus,
      pollAt,
    ]);
  }

  /** A poll answered ended: the outcome and where the results are (the lease is kept to read them). */
  recordEnded(
    groupId: string,
    poller: string,
    ended: { upstreamStatus: string; outcome: string; found: Record<string, string> },
  ): Promise<boolean> {
    return this.fenced(
      groupId,
      poller,
      `state = 'ended', upstream_status = $3, outcome = $4, found = $5::jsonb, tries = 0`,
      [ended.upstreamStatus, ended.outcome, JSON.stringify(ended.found)],
      `state = 'created'`,
    );
  }

  /** Every task of the group has ended: the group is done. */
  recordRead(groupId: string, poller: string, counts: { succeeded: number; failed: number }): Promise<boolean> {
    return this.fenced(
      groupId,
      poller,
      `state = 'read', succeeded_count = succeeded_count + $3, failed_count = failed_count + $4, finished_at = now(), poller = NULL, lease_until = NULL`,
      [counts.succeeded, counts.failed],
    );
  }

  /** The upstream refused the group (its tasks are failed and refunded by the caller). */
  recordFailed(groupId: string, poller: string, error: string, failed: number): Promise<boolean> {
    return this.fenced(
      groupId,
      poller,
      `state = 'failed', last_error = $3, failed_count = failed_count + $4, finished_at = now(), poller = NULL, lease_until = NULL`,
      [error, failed],
    );
  }

  /** Passing trouble at the current step: tried again from pollAt, by whichever generator leases it then. */
  retryLater(groupId: string, poller: string, error: string, pollAt: Date): Promise<boolean> {
    return this.fenced(groupId, poller, `tries = tries + 1, last_error = $3, poll_at = $4, poller = NULL, lease_until = NULL`, [
      error,
      pollAt,
    ]);
  }

  /** Lets go of every group this poller holds (at a shutdown), due at once for the next. */
  async releaseAll(poller: string): Promise<number> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `UPDATE upstream_batches SET poller = NULL, lease_until = NULL WHERE poller = $1 RETURNING id`,
      [poller],
    );
    return rows.length;
  }

  /** Groups by state and lines waiting for a group: the kiln_economy_* gauges. */
  async stats(): Promise<{ byState: Record<string, number>; waitingLines: number }> {
    const states = await queryRows<{ state: string; n: number }>(
      this.db,
      `SELECT state, count(*)::int AS n FROM upstream_batches WHERE state NOT IN ('read', 'failed') GROUP BY state`,
    );
    const [{ n }] = await queryRows<{ n: number }>(
      this.db,
      `SELECT count(*)::int AS n FROM tasks WHERE status = 'pending' AND tier = 'economy'`,
    );
    return { byState: Object.fromEntries(states.map((s) => [s.state, s.n])), waitingLines: n };
  }

  /** TaskEconomyExpiry.expiredBatches */
  expiredBatches(limit: number): Promise<string[]> {
    return this.expiry.expiredBatches(limit);
  }

  /** TaskEconomyExpiry.expireBatch */
  expireBatch(batchId: string): Promise<{ count: number; model: string } | null> {
    return this.expiry.expireBatch(batchId);
  }

  private async fenced(groupId: string, poller: string, set: string, params: unknown[], where = 'true'): Promise<boolean> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `UPDATE upstream_batches SET ${set}, updated_at = now() WHERE id = $1 AND poller = $2 AND ${where} RETURNING id`,
      [groupId, poller, ...params],
    );
    return rows.length > 0;
  }
}
