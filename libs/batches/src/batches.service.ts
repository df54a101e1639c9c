import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { hash, randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { BatchLimits, countActiveBatches, lockAccountForBatch, readBatchLimits } from '@app/accounts';
import { BillingService, budgetRefusal, insufficientCredits, keyBudgetUse, nextUtcMidnight } from '@app/billing';
import { CatalogService, economyUnitCost, MAX_IMAGES_PER_BATCH, refImageCap } from '@app/catalog';
import { BatchTier, Cursor, encodeCursor, isUuid, ModelEntity, queryRows } from '@app/database';
import { ErrorCode, ErrorDetails, invalidRequest, KilnError, notFound } from '@app/errors';
import {
  findRememberedCreation,
  IdempotentRequest,
  RememberedCreation,
  rememberCreation,
  replayOf,
  takeIdempotencyKey,
} from '@app/idempotency';
import { AuthenticatedKey, readKeyBudget, requireModelAllowed } from '@app/keys';
import { recordSpendAlerts } from '@app/webhooks';
import { KilnMetrics, stampStage } from '@app/metrics';
import { pixelSize } from '@app/providers';
import {
  addToCounts,
  BatchCancellation,
  BatchView,
  countTasksByBatch,
  emptyCounts,
  insertBatchWithTasks,
  NewBatch,
  NewTask,
  selectTaskViews,
  selectUpstreamRequestIds,
  selectTaskRoutes,
  TaskDispatchService,
  TaskView,
  toBatchView,
} from '@app/tasks';
import { UploadsService } from '@app/uploads';
import { BatchRequest, CreateBatchInput, normalizeBatchRequest, SEED_MAX } from './batch-request';
import { BatchFilter } from './batch-filter';
import { selectBatchFields, selectBatchPage } from './batch-reads';
import { ContentPolicyService } from './content-policy';
import { fanOut, imageCount, TaskPosition, taskPosition } from './fan-out';

/** Who creates a batch: an API key, or the account holder in the dashboard (no key). */
export type BatchActor = {
  accountId: string;
  apiKeyId: string | null;
  via: 'api' | 'dashboard';
  /** The key's models allowlist as its request authenticated (empty or absent: every model). */
  keyModels?: readonly string[];
};

/** The actor of a request made with an API key. */
export function keyActor(auth: AuthenticatedKey): BatchActor {
  return { accountId: auth.account.id, apiKeyId: auth.key.id, via: 'api', keyModels: auth.key.models };
}

/** A task as clients see it: its row and its place in the batch's fan-out. */
export type BatchTask = TaskView & TaskPosition;

/** A batch just created: its row as written. */
export type CreatedBatch = NewBatch & { status: 'pending'; createdAt: Date; expiresAt: Date | null };

/** What a batch would cost and whether it would be created now (POST /v1/batches/estimate). */
export interface BatchEstimate {
  total: number;
  /** The tier priced: creditCost is that tier's price per image. */
  tier: BatchTier;
  creditCost: number;
  creditsRequired: number;
  balance: number;
  /** The key's daily cap and today's use; null without a key or without a cap. */
  dailyCap: { cap: number; used: number; remaining: number; resetsAt: number } | null;
  wouldCreate: boolean;
  /** What create would refuse with now (plan and money), as the error object's fields. */
  refusal: { code: ErrorCode; message: string; details: ErrorDetails } | null;
}

@Injectable()
export class BatchesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly catalog: CatalogService,
    private readonly uploads: UploadsService,
    private readonly billing: BillingService,
    private readonly contentPolicy: ContentPolicyService,
    private readonly dispatcher: TaskDispatchService,
    private readonly cancellation: BatchCancellation,
    private readonly metrics: KilnMetrics,
  ) {}

  /**
   * Checks the request (shape, model, size and price, references, prompts), then in one
   * transaction: lock the account, check the plan's limits, charge, check the key's daily
   * cap, and write the batch and its tasks; then hand the first tasks to the queue. The
   * order of the checks is the order of the refusals callers see. A refusal at any step
   * changes nothing.
   *
   * The routes call createOnce, whose answer is the 201 body; this one returns the whole row
   * as written (createdViaApi, apiKeyId, the provider snapshot), which is what a test of the
   * creation itself checks (test/batches-concurrency.e2e-spec.ts, the dashboard path).
   */
  create(actor: BatchActor, input: CreateBatchInput): Promise<CreatedBatch> {
    return this.createOrReplay(actor, input, null);
  }

  /**
   * create, made safe to retry by the client's `Idempotency-Key` (null: none sent). A key
   * already used with the same request answers its remembered 201 again, changing nothing
   * (`replayed`); with another request, idempotency_key_reused; while its first request still
   * runs, idempotency_key_in_use. Only a success is remembered, in the transaction that
   * creates the batch: a refused request leaves the key unused, to be retried once its cause
   * is fixed.
   */
  async createOnce(
    actor: BatchActor,
    input: CreateBatchInput,
    idempotency: IdempotentRequest | null,
  ): Promise<{ created: RememberedCreation; replayed: boolean }> {
    if (idempotency) {
      // Most retries come after the first request ended: answered without checking anything
      // again (the plan or the balance may refuse a second creation by now).
      const remembered = await findRememberedCreation(this.db, actor.accountId, idempotency.key);
      if (remembered) return { created: replayOf(remembered, idempotency), replayed: true };
    }
    const outcome = await this.createOrReplay(actor, input, idempotency);
    if ('replay' in outcome) return { created: outcome.replay, replayed: true };
    return { created: createdResponse(outcome), replayed: false };
  }

  /**
   * Prices a request without creating it: checks 1-6 refuse exactly as create does, then what
   * create would answer now for the plan and the money is reported, not thrown. Nothing is
   * charged, written, locked or reserved.
   */
  async estimate(actor: BatchActor, input: CreateBatchInput): Promise<BatchEstimate> {
    const { batch } = await this.checkRequest(actor, input);
    const cost = batch.creditsCharged;
    // One snapshot, so the figures agree with each other.
    return this.db.transaction('REPEATABLE READ', async (m) => {
      const limits = await readBatchLimits(m, actor.accountId);
      const active = await countActiveBatches(m, actor.accountId, batch.tier);
      const [{ balance }] = await queryRows<{ balance: string | number }>(m, `SELECT balance FROM accounts WHERE id = $1`, [
        actor.accountId,
      ]);
      const budget = actor.apiKeyId ? await keyBudgetUse(m, actor.apiKeyId, await readKeyBudget(m, actor.apiKeyId)) : null;
      const cap = budget?.budget.period === 'day' ? budget.budget.credits : null;
      const used = budget?.spent ?? 0;
      const refusal =
        planRefusal(batch, limits, active) ??
        (Number(balance) < cost ? insufficientCredits(cost, Number(balance)) : null) ??
        (budget ? budgetRefusal(budget.budget, budget.spent, cost) : null);
      return {
        total: batch.total,
        tier: batch.tier,
        creditCost: batch.unitCost,
        creditsRequired: cost,
        balance: Number(balance),
        dailyCap: cap === null ? null : { cap, used, remaining: Math.max(0, cap - used), resetsAt: nextUtcMidnight() },
        wouldCreate: refusal === null,
        refusal: refusal ? { code: refusal.code, message: refusal.message, details: refusal.details ?? {} } : null,
      };
    });
  }

  /** Checks 2-6 of the validation order (shape, model, size, tier and price, references, prompts): the batch they make. */
  private async checkRequest(actor: BatchActor, input: CreateBatchInput): Promise<{ batch: NewBatch; refUploadIds: string[] }> {
    const req = normalizeBatchRequest(input);
    const model = await this.catalog.requireEnabled(req.model);
    if (actor.keyModels) requireModelAllowed(actor.keyModels, model.key);
    const standardCost = priceOf(model, req);
    // The economy tier prices the same legal sizes, or refuses with tier_not_available.
    const { unitCost, windowHours } =
      req.tier === 'economy' ? economyUnitCost(model, req.resolution) : { unitCost: standardCost, windowHours: null };
    const refUploadIds = await this.resolveReferences(actor.accountId, model, req);
    await this.checkPrompts(model, req.prompts);
    // Counted, not expanded: the tasks are made only once every check has passed, so a
    // refused request costs work bounded by its body, whatever total it asks for.
    return { batch: newBatch(actor, req, model, unitCost, windowHours), refUploadIds };
  }

  /** Without an Idempotency-Key there is nothing to replay: the compiler knows it from these overloads. */
  private createOrReplay(actor: BatchActor, input: CreateBatchInput, idempotency: null): Promise<CreatedBatch>;
  private createOrReplay(
    actor: BatchActor,
    input: CreateBatchInput,
    idempotency: IdempotentRequest | null,
  ): Promise<CreatedBatch | { replay: RememberedCreation }>;
  private async createOrReplay(
    actor: BatchActor,
    input: CreateBatchInput,
    idempotency: IdempotentRequest | null,
  ): Promise<CreatedBatch | { replay: RememberedCreation }> {
    const { batch, refUploadIds } = await this.checkRequest(actor, input);

    // Asked of Redis while the transaction checks and charges (it never rejects); a refused
    // request never waits for it. Economy tasks are never queued: they wait for the collector.
    const dispatching = batch.tier === 'economy' ? Promise.resolve(0) : this.dispatcher.dispatchCount(batch.total);
    const outcome = await this.db.transaction(async (m) => {
      if (idempotency) {
        // A request with the same key that committed since the first look is replayed.
        const remembered = await takeIdempotencyKey(m, actor.accountId, idempotency.key);
        if (remembered) return { replay: replayOf(remembered, idempotency) };
      }
      const limits = await lockAccountForBatch(m, actor.accountId, actor.apiKeyId);
      const planRefused = planRefusal(batch, limits, await countActiveBatches(m, actor.accountId, batch.tier));
      if (planRefused) throw planRefused;
      // The key's budget was locked with the account, so an edit or another creation through
      // the key cannot race the check (docs/billing.md#per-key-budgets).
      const budget = limits.keyBudget && actor.apiKeyId ? await keyBudgetUse(m, actor.apiKeyId, limits.keyBudget) : null;
      // insufficient_credits comes before the key's budget; a throw below rolls the charge back
      // with everything else.
      const balanceAfter = await this.billing.chargeBatch(m, {
        accountId: actor.accountId,
        batchId: batch.id,
        apiKeyId: actor.apiKeyId,
        amount: batch.creditsCharged,
      });
      const budgetRefused = budget ? budgetRefusal(budget.budget, budget.spent, batch.creditsCharged) : null;
      if (budgetRefused) throw budgetRefused;
      // credits.low and key.budget.threshold, in the charge's transaction (docs/webhooks.md).
      await recordSpendAlerts(m, {
        accountId: actor.accountId,
        batchId: batch.id,
        amount: batch.creditsCharged,
        balanceAfter,
        lowCreditsThreshold: limits.lowCreditsThreshold,
        key: budget && actor.apiKeyId ? { id: actor.apiKeyId, budget: budget.budget, spentBefore: budget.spent } : null,
      });
      const tasks = tasksOf(batch, refUploadIds);
      const dispatchCount = await dispatching;
      const { createdAt, expiresAt } = await insertBatchWithTasks(m, batch, tasks, dispatchCount);
      const created: CreatedBatch = { ...batch, status: 'pending', createdAt, expiresAt };
      if (idempotency) await rememberCreation(m, actor.accountId, idempotency, batch.id, createdResponse(created));
      return { created, tasks, dispatchCount };
    });
    if (outcome.replay) return { replay: outcome.replay };

    const { created, tasks, dispatchCount } = outcome;
    stampStage(created.id, 'committed');
    this.metrics.creditsCharged.inc({ model: batch.model }, batch.creditsCharged);
    await this.dispatcher.enqueueQueued(
      tasks.filter((t) => t.seq < dispatchCount).map((t) => ({ id: t.id, batchId: created.id, seq: t.seq })),
    );
    stampStage(created.id, 'enqueued');
    return created;
  }

  /** Newest first, keyset-paginated on (createdAt, id); counts for the page in one query. */
  async list(
    accountId: string,
    limit: number,
    cursor: Cursor | null,
    filter: BatchFilter = {},
  ): Promise<{ batches: BatchView[]; nextCursor: string | null }> {
    const rows = await selectBatchPage(this.db, accountId, limit, cursor, filter);
    const page = rows.slice(0, limit);
    const counts = await countTasksByBatch(
      this.db,
      page.map((b) => b.id),
    );
    const last = page[page.length - 1];
    return {
      batches: page.map((b) => toBatchView(b, counts.get(b.id) ?? emptyCounts())),
      nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
    };
  }

  /** Any account's batch, for operators (support): as the owner polls it, plus whose it is and each task's queue-upstream request id. */
  async detailForOperator(batchId: string): Promise<{
    accountId: string;
    batch: BatchView;
    tasks: BatchTask[];
    upstreamRequestIds: Map<string, string>;
    routes: Map<string, { index: number; type: string }>;
  }> {
    const [owner]: { account_id: string }[] = isUuid(batchId)
      ? await this.db.query(`SELECT account_id FROM batches WHERE id = $1`, [batchId])
      : [];
    if (!owner) throw notFound('Batch');
    const [detail, upstreamRequestIds, routes] = await Promise.all([
      this.detail(owner.account_id, batchId),
      selectUpstreamRequestIds(this.db, batchId),
      selectTaskRoutes(this.db, batchId),
    ]);
    return { accountId: owner.account_id, ...detail, upstreamRequestIds, routes };
  }

  /** The polling endpoint's data: two queries however many tasks the batch has. */
  async detail(accountId: string, batchId: string): Promise<{ batch: BatchView; tasks: BatchTask[] }> {
    const batch = isUuid(batchId) ? await selectBatchFields(this.db, accountId, batchId) : null;
    if (!batch) throw notFound('Batch');
    const tasks = await selectTaskViews(this.db, batchId);
    const counts = tasks.reduce((c, t) => addToCounts(c, t.status), emptyCounts());
    counts.cancelling = tasks.filter((t) => t.cancelling).length;
    return { batch: toBatchView(batch, counts), tasks: tasks.map((t) => ({ ...t, ...taskPosition(t.seq, batch) })) };
  }

  /**
   * Cancels the batch (BatchCancellation: every task not yet in its provider's hands, refunded
   * in one transaction; those a queue upstream with a cancel accepted are asked of it by a
   * generator, and counted `cancelling` until it answers) and returns it as it is afterwards. Cancelling it again changes
   * nothing; a batch that finished without a cancel is refused.
   */
  async cancel(accountId: string, batchId: string): Promise<BatchView> {
    if (!isUuid(batchId)) throw notFound('Batch');
    await this.cancellation.cancel(accountId, batchId);
    return (await this.detail(accountId, batchId)).batch;
  }

  /** References: support, count, then ownership of every URL; returns upload ids in request order. */
  private async resolveReferences(accountId: string, model: ModelEntity, req: BatchRequest): Promise<string[]> {
    const given = req.refImages.length;
    if (given === 0) return [];
    if (!model.supportsRefImages) {
      throw new KilnError(ErrorCode.RefsNotSupported, `${model.key} does not accept reference images`, { model: model.key });
    }
    const max = refImageCap(model);
    if (given > max) {
      throw new KilnError(ErrorCode.TooManyRefImages, `${model.key} accepts at most ${max} reference images`, { max, given });
    }
    const owned = await this.uploads.findOwnedByUrls(accountId, req.refImages);
    return req.refImages.map((url, i) => {
      const upload = owned.get(url);
      if (!upload) {
        throw invalidRequest(`refImages[${i}]`, 'unknown_upload', `refImages[${i}] is not a URL returned by POST /uploads to this account`);
      }
      return upload.id;
    });
  }

  /** Every prompt's length first, then the content policy. */
  private async checkPrompts(model: ModelEntity, prompts: string[]): Promise<void> {
    const tooLong = prompts.findIndex((p) => codePointLength(p) > model.maxPromptLength);
    if (tooLong !== -1) {
      throw new KilnError(ErrorCode.PromptTooLong, `Prompt ${tooLong} is longer than ${model.maxPromptLength} characters`, {
        index: tooLong,
        maxLength: model.maxPromptLength,
      });
    }
    const blocked = await this.contentPolicy.firstBlocked(prompts);
    if (blocked !== -1) {
      throw new KilnError(ErrorCode.ContentBlocked, `Prompt ${blocked} was blocked by the content policy; edit it and resubmit`, {
        index: blocked,
      });
    }
  }
}

/** The ratio must be legal at the resolution, and priced; returns the unit cost. */
function priceOf(model: ModelEntity, req: BatchRequest): number {
  const legal = model.resolutionsByRatio[req.aspectRatio] ?? [];
  const unitCost = model.creditCost[req.resolution];
  if (!legal.includes(req.resolution) || typeof unitCost !== 'number') {
    throw new KilnError(ErrorCode.SizeNotAllowed, `${model.key} does not offer ${req.aspectRatio} at ${req.resolution}`, {
      aspectRatio: req.aspectRatio,
      resolution: req.resolution,
      allowed: model.resolutionsByRatio,
    });
  }
  return unitCost;
}

function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** Deterministic per (batch, position), so a task re-rendered after a crash gives the same image. */
function taskSeed(batchId: string, seq: number): number {
  // The one-shot hash: the same digest as createHash's, in 60 % of the time (100 per batch).
  return hash('sha256', `${batchId}:${seq}`, 'buffer').readUInt32BE(0) >>> 1;
}

/** The batch row a checked request makes; `windowHours` is the economy window (null for standard). */
function newBatch(actor: BatchActor, req: BatchRequest, model: ModelEntity, unitCost: number, windowHours: number | null): NewBatch {
  const total = imageCount(req.prompts.length, req.refImages.length, req.refMode, req.countPerCombo);
  const { width, height } = pixelSize(req.aspectRatio, req.resolution);
  return {
    id: randomUUID(),
    accountId: actor.accountId,
    apiKeyId: actor.apiKeyId,
    prompts: req.prompts,
    model: model.key,
    aspectRatio: req.aspectRatio,
    resolution: req.resolution,
    quality: req.quality,
    background: req.background,
    countPerCombo: req.countPerCombo,
    refMode: req.refMode,
    refImages: req.refImages,
    total,
    note: req.note,
    seed: req.seed,
    outputFormat: req.outputFormat,
    unitCost,
    creditsCharged: total * unitCost,
    provider: model.provider,
    routes: model.routes,
    failover: model.failover,
    width,
    height,
    createdViaApi: actor.via === 'api',
    tier: req.tier,
    windowHours,
    deadline: req.deadline,
  };
}

/**
 * The plan's refusal of a batch, if any. create asks under the account lock, so two creations
 * cannot both take the last slot; an estimate asks without one. `active`: the account's
 * unfinished batches of the batch's tier; each tier has its own cap.
 */
function planRefusal(batch: Pick<NewBatch, 'total' | 'tier'>, limits: BatchLimits, active: number): KilnError | null {
  const { total } = batch;
  // MAX_IMAGES_PER_BATCH also holds against a plan row edited outside the admin API.
  const maxImages = Math.min(limits.maxImagesPerBatch, MAX_IMAGES_PER_BATCH);
  if (total > maxImages) {
    return new KilnError(ErrorCode.BatchLimitExceeded, `Your plan allows at most ${maxImages} images per batch`, {
      total,
      max: maxImages,
    });
  }
  if (batch.tier === 'economy') {
    if (active < limits.maxConcurrentEconomyBatches) return null;
    return new KilnError(ErrorCode.ConcurrentLimitExceeded, 'Too many economy batches are still running; wait for one to finish', {
      tier: 'economy',
      active,
      max: limits.maxConcurrentEconomyBatches,
    });
  }
  if (active >= limits.maxConcurrentBatches) {
    return new KilnError(ErrorCode.ConcurrentLimitExceeded, 'Too many batches are still running; wait for one to finish', {
      active,
      max: limits.maxConcurrentBatches,
    });
  }
  return null;
}

/** The 201 body of a creation, as remembered for replays. */
function createdResponse(b: CreatedBatch): RememberedCreation {
  return { id: b.id, total: b.total, creditsCharged: b.creditsCharged, status: b.status, tier: b.tier };
}

/** The batch's tasks in fan-out order, each with its id and seed. */
function tasksOf(batch: NewBatch, refUploadIds: string[]): NewTask[] {
  return fanOut(batch.prompts.length, refUploadIds, batch.refMode, batch.countPerCombo).map((t) => ({
    ...t,
    id: randomUUID(),
    seed: batch.seed === null ? taskSeed(batch.id, t.seq) : (batch.seed + t.seq) % (SEED_MAX + 1),
  }));
}
