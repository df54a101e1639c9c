import { OutputFormat, PreparedStatement, ProviderRoute } from '@app/database';
import type { FailoverSettings } from '@app/providers';
import { newObjectToken } from '@app/storage';
import { FencedWrites, lockBatchesInIdOrder, MAX_GROUP, overdueBatchesIn, statusIs } from './fenced-write';
import { groupWrites } from './group-writes';
import type { SubmitIntent } from './submit-intent.store';

/** What a task's render needs of its batch: the batch's snapshot, read in the claim. */
export interface RenderBatch {
  id: string;
  model: string;
  aspectRatio: string;
  resolution: string;
  quality: string;
  background: string | null;
  outputFormat: OutputFormat;
  /** The route this task's attempts go to now: routes[routeIndex] of the batch's chain, else its provider. */
  provider: ProviderRoute;
  /** The batch's chain of routes (null: its provider alone) and failover settings (null: the defaults). */
  routes: ProviderRoute[] | null;
  failover: FailoverSettings | null;
  width: number;
  height: number;
  previewUrl: string | null;
  /** Catalog flags of the batch's model (false when the model row is gone). */
  supportsQuality: boolean;
  supportsBackground: boolean;
}

export interface ClaimedTask {
  id: string;
  batchId: string;
  accountId: string;
  seq: number;
  prompt: string;
  seed: number;
  refUploadIds: string[];
  /** Attempts including this one. */
  attempts: number;
  /** The random part of the task's result key, the same for every attempt. */
  resultToken: string;
  /** Null only if the batch row is gone (a manual repair): the run then fails as internal. */
  batch: RenderBatch | null;
  /** The queue upstream's request this task already made (to resume, never to submit again); null if none. */
  upstream: UpstreamRequest | null;
  /** The route of its batch's chain the task's attempts go to (0: the first, or the only one). */
  routeIndex: number;
  /**
   * A submit an earlier attempt recorded the intent of and never the answer (SubmitIntentStore),
   * as the claim read it: null when none; absent when the read that made this claim did not
   * look (the submit then asks SubmitIntentStore.unanswered).
   */
  submitIntent?: SubmitIntent | null;
}

/** A request a queue upstream accepted for a task (see upstream-wait.store.ts). */
export interface UpstreamRequest {
  requestId: string;
  /** What polling and fetching it needs, as the route's type wrote it. */
  handle: Record<string, string>;
  submittedAt: Date;
}

/**
 * Takes a group of tasks for one attempt each and reads what their renders need, in one
 * statement: their batches locked first and in id order (as every task write after creation
 * does, the cancel included, so none of them can deadlock another), the fenced claims, the
 * batches' move out of `pending` and version bump, and the batch and model rows, read from
 * the statement's snapshot, which is all a render needs of them. A task's first claim also
 * gives it its result token. $1 distinct task ids, $2 a fresh token for each.
 *
 * Two forms (claimStatement):
 * - the claim alone: the task is not sent yet (sent_at null, shown `queued`): its worker may
 *   still wait for a slot, and a cancel may take it until `send`;
 * - the claim and the send together, for a worker that already holds its slot: one row
 *   version fewer per task, and no send statement. Its jobs name the tasks' batches ($3), so
 *   the batches are locked by id, without reading the tasks first; a task whose batch is not
 *   among them is not claimed.
 */
function claimStatement(form: 'claim' | 'claim-and-send'): PreparedStatement {
  const sending = form === 'claim-and-send';
  const batchesOfInput = sending ? 'id = ANY($3::uuid[])' : 'id IN (SELECT batch_id FROM tasks WHERE id = ANY($1::uuid[]))';
  return {
    name: sending ? 'kiln_claim_send_group_v3' : 'kiln_claim_group_v3',
    text: `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::text[]) AS i(id, token)
), locked AS (
  ${lockBatchesInIdOrder(batchesOfInput)}
), overdue AS (
  ${overdueBatchesIn('locked')}
), claimed AS (
  UPDATE tasks t SET status = 'running', attempts = t.attempts + 1,
         -- A task with an upstream request stays sent: it is resumed, never sent again.
         progress = CASE WHEN t.upstream_request_id IS NULL THEN ${sending ? 1 : 0} ELSE t.progress END,
         sent_at = CASE WHEN t.upstream_request_id IS NULL THEN ${sending ? 'now()' : 'NULL'} ELSE t.sent_at END,
         upstream_poll_at = NULL, upstream_lease_until = NULL, upstream_poller = NULL,
         started_at = COALESCE(t.started_at, now()), updated_at = now(),
         result_token = COALESCE(t.result_token, i.token)
    FROM input i
   -- Found by primary key whatever the statistics say (statusIs).
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'pending', 'queued', 'running')}
     -- Economy tasks are the collector's (upstream batches), never a job's: a stray job finds nothing.
     AND t.tier = 'standard' AND t.upstream_batch_id IS NULL
     AND t.batch_id IN (SELECT id FROM locked)
     -- Past its batch's deadline a task not yet sent is never started (the deadline sweep
     -- cancels it); one already sent (a takeover, or a queue upstream's request) runs on.
     AND (t.upstream_request_id IS NOT NULL OR (t.status = 'running' AND t.sent_at IS NOT NULL)
          OR t.batch_id NOT IN (SELECT id FROM overdue))
   RETURNING t.id, t.batch_id, t.account_id, t.seq, t.prompt, t.seed, t.ref_upload_ids, t.attempts, t.result_token,
             t.upstream_request_id, t.upstream_handle, t.upstream_submitted_at, t.route_index,
             t.submit_intent_at, t.submit_intent
), touched AS (
  UPDATE batches SET status = CASE WHEN status = 'pending' THEN 'running' ELSE status END, version = version + 1
   WHERE id IN (SELECT batch_id FROM claimed)
)
SELECT c.*, c.submit_intent_at::text AS submit_intent_stamp,
       b.id AS batch_found, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.output_format,
       -- The task's route: its place in the batch's chain (the batch's provider when it has none).
       b.routes, b.failover, COALESCE(b.routes -> c.route_index, b.provider) AS provider,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background
  FROM claimed c
  LEFT JOIN batches b ON b.id = c.batch_id
  LEFT JOIN models m ON m.key = b.model`,
  };
}

const CLAIM_GROUP = claimStatement('claim');
const CLAIM_AND_SEND_GROUP = claimStatement('claim-and-send');

/** A claim and send of a task whose job named its batch. */
interface SentClaim {
  taskId: string;
  batchId: string;
}

/**
 * The claim (`pending`/`queued`/`running` -> `running`, attempts + 1), group-committed: the
 * many runs of a generator share statements, which is most of what a task costs PostgreSQL
 * and this process.
 */
export class TaskClaims {
  private readonly claimOne = groupWrites((ids: readonly string[]) => this.claimGroup(ids), MAX_GROUP);
  private readonly claimAndSendOne = groupWrites((group: readonly SentClaim[]) => this.claimAndSendGroup(group), MAX_GROUP);

  constructor(private readonly writes: FencedWrites) {}

  /**
   * Takes the task for one attempt, or returns null when it is terminal (or gone): a
   * redelivered job for a finished task does nothing. A task found `running` belongs to a
   * worker that died or lost its job (Bull stalled recovery); bumping `attempts` takes it
   * over and fences the previous holder out. The batch leaves `pending` in the same
   * statement, which also reads the batch for the render.
   */
  claim(taskId: string): Promise<ClaimedTask | null> {
    return this.claimOne(taskId);
  }

  /**
   * The claim and the send in one write, for a run that already holds its slot (its job named
   * the task's batch): null as for `claim`, and also when the task is not of that batch.
   */
  claimAndSend(taskId: string, batchId: string): Promise<ClaimedTask | null> {
    return this.claimAndSendOne({ taskId, batchId });
  }

  private claimGroup(ids: readonly string[]): Promise<(ClaimedTask | null)[]> {
    return this.claimed(CLAIM_GROUP, ids, []);
  }

  private claimAndSendGroup(group: readonly SentClaim[]): Promise<(ClaimedTask | null)[]> {
    return this.claimed(
      CLAIM_AND_SEND_GROUP,
      group.map((c) => c.taskId),
      [[...new Set(group.map((c) => c.batchId))]],
    );
  }

  private async claimed(statement: PreparedStatement, ids: readonly string[], extra: unknown[]): Promise<(ClaimedTask | null)[]> {
    const distinct = [...new Set(ids)];
    const rows = await this.writes.grouped<ClaimRow>(statement, [distinct, distinct.map(() => newObjectToken()), ...extra]);
    this.writes.announce(rows.map((row) => row.batch_id));
    const byId = new Map<string, ClaimedTask>(rows.map((row) => [row.id, claimedTaskOf(row)]));
    // A job delivered twice at once is run once: the first delivery gets the claim, the
    // others nothing to do, as if they had come after it.
    return ids.map((id) => {
      const claim = byId.get(id) ?? null;
      byId.delete(id);
      return claim;
    });
  }
}

/** node-postgres returns uuid[] as an array, or as its text form on older type parsers. */
function parseUuidArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string') {
    const inner = value.replace(/^\{|\}$/g, '').trim();
    return inner.length === 0 ? [] : inner.split(',').map((s) => s.trim());
  }
  return [];
}

/** A claimed task's own columns (CLAIM_GROUP's `claimed`, and the economy and waiting reads of the same columns). */
export interface ClaimedTaskRow {
  id: string;
  batch_id: string;
  account_id: string;
  seq: number;
  prompt: string;
  seed: number;
  ref_upload_ids: unknown;
  attempts: number;
  result_token: string;
  /** Absent from reads that never see an upstream request (the economy tier's). The three are recorded and cleared together. */
  upstream_request_id?: string | null;
  upstream_handle?: Record<string, string> | null;
  upstream_submitted_at?: Date | null;
  /** Absent from the economy tier's reads (its tasks stay on the first route). */
  route_index?: number;
  /** Read by the claims only (ClaimedTask.submitIntent); recorded and cleared together. */
  submit_intent_at?: Date | null;
  /** submit_intent_at as text, exactly (SubmitIntent.stamp). */
  submit_intent_stamp?: string | null;
  submit_intent?: Record<string, unknown> | null;
}

/** The batch and model columns a render needs (CLAIM_GROUP's, and BATCH_SNAPSHOT_COLUMNS'). */
export interface RenderBatchRow {
  batch_id: string;
  model: string;
  aspect_ratio: string;
  resolution: string;
  quality: string;
  background: string | null;
  output_format: OutputFormat;
  provider: ProviderRoute;
  routes?: ProviderRoute[] | null;
  failover?: FailoverSettings | null;
  width: number;
  height: number;
  preview_url: string | null;
  supports_quality: boolean;
  supports_background: boolean;
}

/** A CLAIM_GROUP row: the claimed task, its batch's columns read in the same statement (null when the batch row is gone, then batch_found is null). */
export interface ClaimRow extends ClaimedTaskRow, RenderBatchRow {
  batch_found: string | null;
}

/**
 * A CLAIM_GROUP row (or a row with the same columns) as a claim. `batch`, when given, is used
 * instead of the row's batch columns: callers reading thousands of tasks of a few batches
 * (the economy collector) read each batch once and share it.
 */
export function claimedTaskOf(row: ClaimedTaskRow | ClaimRow, batch?: RenderBatch | null): ClaimedTask {
  return {
    id: row.id,
    batchId: row.batch_id,
    accountId: row.account_id,
    seq: row.seq,
    prompt: row.prompt,
    seed: row.seed,
    refUploadIds: parseUuidArray(row.ref_upload_ids),
    attempts: row.attempts,
    resultToken: row.result_token,
    batch: batch !== undefined ? batch : 'batch_found' in row && row.batch_found ? renderBatchOf(row) : null,
    upstream: row.upstream_request_id
      ? { requestId: row.upstream_request_id, handle: row.upstream_handle ?? {}, submittedAt: new Date(row.upstream_submitted_at as Date) }
      : null,
    routeIndex: row.route_index ?? 0,
    ...(row.submit_intent_at === undefined ? {} : { submitIntent: submitIntentOf(row) }),
  };
}

/** An intent left without a request (what SubmitIntentStore.unanswered answers), from a claim's row. */
function submitIntentOf(row: ClaimedTaskRow): SubmitIntent | null {
  if (!row.submit_intent_at || row.upstream_request_id) return null;
  return { at: new Date(row.submit_intent_at), stamp: row.submit_intent_stamp ?? '', key: row.submit_intent ?? {} };
}

/** The batch columns of a CLAIM_GROUP row (or of BATCH_SNAPSHOT_COLUMNS' row). */
export function renderBatchOf(row: RenderBatchRow): RenderBatch {
  return {
    id: row.batch_id,
    model: row.model,
    aspectRatio: row.aspect_ratio,
    resolution: row.resolution,
    quality: row.quality,
    background: row.background,
    outputFormat: row.output_format,
    provider: row.provider,
    routes: row.routes ?? null,
    failover: row.failover ?? null,
    width: row.width,
    height: row.height,
    previewUrl: row.preview_url,
    supportsQuality: row.supports_quality,
    supportsBackground: row.supports_background,
  };
}
