import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createHash, randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { BillingService, nextUtcMidnight } from '@app/billing';
import { CatalogService, MAX_IMAGES_PER_BATCH, refImageCap } from '@app/catalog';
import { BatchEntity, Cursor, encodeCursor, isUuid, ModelEntity, TaskStatus } from '@app/database';
import { ErrorCode, invalidRequest, KilnError, notFound } from '@app/errors';
import { pixelSize } from '@app/providers';
import { UploadsService } from '@app/uploads';
import { BatchRequest, CreateBatchInput, normalizeBatchRequest } from './batch-request';
import { addToCounts, BatchFields, BatchView, emptyCounts, TaskCounts, TaskView, toBatchView } from './batch-view';
import { ContentPolicy } from './content-policy';
import { fanOut, FannedTask, imageCount } from './fan-out';
import { TaskDispatchService } from './task-dispatch.service';

type Task = FannedTask & { id: string; seed: number };

/** Who creates a batch: an API key, or the account holder in the dashboard (no key). */
export type BatchActor = { accountId: string; apiKeyId: string | null; via: 'api' | 'dashboard' };


@Injectable()
export class BatchesService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly catalog: CatalogService,
    private readonly uploads: UploadsService,
    private readonly billing: BillingService,
    private readonly contentPolicy: ContentPolicy,
    private readonly dispatcher: TaskDispatchService,
  ) {}

  /**
   * Validates in the order of decisions.md 4 (steps 2-8; step 1 is the caller's auth),
   * then charges and writes the batch and all its tasks in one transaction, then hands
   * the tasks to the queue. A refusal at any step changes nothing.
   */
  async create(actor: BatchActor, input: CreateBatchInput): Promise<BatchEntity> {
    const req = normalizeBatchRequest(input);
    const model = await this.catalog.requireEnabled(req.model);
    const unitCost = checkSize(model, req);
    const refUploadIds = await this.resolveReferences(actor.accountId, model, req);
    this.checkPrompts(model, req.prompts);

    // Counted, not expanded: the tasks are made only once every check below has passed, so
    // a refused request costs work bounded by its body, whatever total it asks for.
    const total = imageCount(req.prompts.length, req.refImages.length, req.refMode, req.countPerCombo);
    const cost = total * unitCost;
    const batchId = randomUUID();
    const { width, height } = pixelSize(req.aspectRatio, req.resolution);

    // Asked of Redis while the transaction checks and charges (it never rejects); a refused
    // request never waits for it.
    const dispatching = this.dispatcher.dispatchCount(total);
    let dispatchCount = 0;
    const { batch, tasks } = await this.db.transaction(async (m) => {
      const account = await lockAccount(m, actor.accountId);
      // MAX_IMAGES_PER_BATCH also holds against a plan row edited outside the admin API.
      const maxImages = Math.min(account.maxImagesPerBatch, MAX_IMAGES_PER_BATCH);
      if (total > maxImages) {
        throw new KilnError(ErrorCode.BatchLimitExceeded, `Your plan allows at most ${maxImages} images per batch`, {
          total,
          max: maxImages,
        });
      }
      // Under the account lock, so two concurrent creations cannot both take the last slot.
      const [{ active }] = await m.query(
        `SELECT count(*)::int AS active FROM batches WHERE account_id = $1 AND finished_at IS NULL`,
        [actor.accountId],
      );
      if (active >= account.maxConcurrentBatches) {
        throw new KilnError(ErrorCode.ConcurrentLimitExceeded, 'Too many batches are still running; wait for one to finish', {
          active,
          max: account.maxConcurrentBatches,
        });
      }
      const cap = actor.apiKeyId ? await lockKeyCap(m, this.billing, actor.apiKeyId) : null;
      // insufficient_credits comes before the daily cap (decisions.md 4.8); a throw below
      // rolls the charge back with everything else.
      await this.billing.chargeBatch(m, { accountId: actor.accountId, batchId, apiKeyId: actor.apiKeyId, amount: cost });
      if (cap && cap.used + cost > cap.cap) {
        throw new KilnError(ErrorCode.DailyCreditCapExceeded, "This batch would exceed the key's daily credit cap", {
          cap: cap.cap,
          used: cap.used,
          required: cost,
          resetsAt: nextUtcMidnight(),
        });
      }
      const tasks: Task[] = fanOut(req.prompts.length, refUploadIds, req.refMode, req.countPerCombo).map((t) => ({
        ...t,
        id: randomUUID(),
        seed: taskSeed(batchId, t.seq),
      }));
      const row = m.create(BatchEntity, {
        id: batchId,
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
        unitCost,
        creditsCharged: cost,
        creditsRefunded: 0,
        provider: model.provider,
        width,
        height,
        status: 'pending',
        succeededCount: 0,
        failedCount: 0,
        previewUrl: null,
        createdViaApi: actor.via === 'api',
        finishedAt: null,
      });
      row.createdAt = await insertBatch(m, row);
      dispatchCount = await dispatching;
      await insertTasks(m, row, req.prompts, tasks, dispatchCount);
      return { batch: row, tasks };
    });

    await this.dispatcher.enqueueQueued(tasks.filter((t) => t.seq < dispatchCount).map((t) => t.id));
    return batch;
  }

  /** Newest first, keyset-paginated on (createdAt, id); counts for the page in one query. */
  async list(
    accountId: string,
    limit: number,
    cursor: Cursor | null,
  ): Promise<{ batches: BatchView[]; nextCursor: string | null }> {
    const qb = this.db
      .getRepository(BatchEntity)
      .createQueryBuilder('b')
      .where('b.account_id = :accountId', { accountId })
      .orderBy('b.created_at', 'DESC')
      .addOrderBy('b.id', 'DESC')
      .limit(limit + 1);
    if (cursor) qb.andWhere('(b.created_at, b.id) < (:at, :id)', { at: cursor.createdAt, id: cursor.id });
    const rows = await qb.getMany();
    const page = rows.slice(0, limit);
    const counts = await this.countsFor(page.map((b) => b.id));
    const last = page[page.length - 1];
    return {
      batches: page.map((b) => toBatchView(b, counts.get(b.id) ?? emptyCounts())),
      nextCursor: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : null,
    };
  }

  /** The polling endpoint's data: two queries however many tasks the batch has. */
  async detail(accountId: string, batchId: string): Promise<{ batch: BatchView; tasks: TaskView[] }> {
    const batch = isUuid(batchId) ? await selectBatchFields(this.db, accountId, batchId) : null;
    if (!batch) throw notFound('Batch');
    const tasks = await selectTaskViews(this.db, batchId);
    const counts = tasks.reduce((c, t) => addToCounts(c, t.status), emptyCounts());
    return { batch: toBatchView(batch, counts), tasks };
  }

  private async countsFor(batchIds: string[]): Promise<Map<string, TaskCounts>> {
    const counts = new Map<string, TaskCounts>();
    if (batchIds.length === 0) return counts;
    const rows: { batch_id: string; status: TaskStatus; n: number }[] = await this.db.query(
      `SELECT batch_id, status, count(*)::int AS n FROM tasks WHERE batch_id = ANY($1::uuid[]) GROUP BY batch_id, status`,
      [batchIds],
    );
    for (const r of rows) {
      const c = counts.get(r.batch_id) ?? emptyCounts();
      counts.set(r.batch_id, addToCounts(c, r.status, r.n));
    }
    return counts;
  }

  /** Step 5: support, count, then ownership of every URL; returns upload ids in request order. */
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

  /** Step 6: every prompt's length first, then the content policy. */
  private checkPrompts(model: ModelEntity, prompts: string[]): void {
    const tooLong = prompts.findIndex((p) => codePointLength(p) > model.maxPromptLength);
    if (tooLong !== -1) {
      throw new KilnError(ErrorCode.PromptTooLong, `Prompt ${tooLong} is longer than ${model.maxPromptLength} characters`, {
        index: tooLong,
        maxLength: model.maxPromptLength,
      });
    }
    const blocked = this.contentPolicy.firstBlocked(prompts);
    if (blocked !== -1) {
      throw new KilnError(ErrorCode.ContentBlocked, `Prompt ${blocked} was blocked by the content policy; edit it and resubmit`, {
        index: blocked,
      });
    }
  }
}

/** Step 4: the ratio must be legal at the resolution, and priced; returns the unit cost. */
function checkSize(model: ModelEntity, req: BatchRequest): number {
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
  return createHash('sha256').update(`${batchId}:${seq}`).digest().readUInt32BE(0) >>> 1;
}

/** Locks the account row: an account's creations run one at a time from here to commit. */
async function lockAccount(
  m: EntityManager,
  accountId: string,
): Promise<{ maxImagesPerBatch: number; maxConcurrentBatches: number }> {
  const [row] = await m.query(
    `SELECT a.status, p.max_images_per_batch, p.max_concurrent_batches
       FROM accounts a JOIN plans p ON p.key = a.plan_key
      WHERE a.id = $1 FOR UPDATE OF a`,
    [accountId],
  );
  if (!row) throw notFound('Account');
  if (row.status !== 'active') throw new KilnError(ErrorCode.AccountDisabled, 'This account is disabled');
  return { maxImagesPerBatch: row.max_images_per_batch, maxConcurrentBatches: row.max_concurrent_batches };
}

/** The key's cap (read under a row lock, so an edit cannot race the check) and today's use. */
async function lockKeyCap(
  m: EntityManager,
  billing: BillingService,
  apiKeyId: string,
): Promise<{ cap: number; used: number } | null> {
  const [row] = await m.query(`SELECT credit_cap_per_day FROM api_keys WHERE id = $1 FOR UPDATE`, [apiKeyId]);
  if (!row || row.credit_cap_per_day === null) return null;
  return { cap: row.credit_cap_per_day, used: await billing.creditsUsedToday(apiKeyId, m) };
}

/**
 * clock_timestamp(), not now(): it is read after the account lock was taken, so one
 * account's batches get created_at in commit order and a newest-first listing never
 * shows a batch "older" than one committed before it.
 */
async function insertBatch(m: EntityManager, b: BatchEntity): Promise<Date> {
  const [row] = await m.query(
    `INSERT INTO batches (id, account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background,
       count_per_combo, ref_mode, ref_images, total, note, unit_cost, credits_charged, credits_refunded, provider,
       width, height, status, created_via_api, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 0, $17, $18, $19, 'pending', $20,
       clock_timestamp())
     RETURNING created_at`,
    [
      b.id,
      b.accountId,
      b.apiKeyId,
      JSON.stringify(b.prompts),
      b.model,
      b.aspectRatio,
      b.resolution,
      b.quality,
      b.background,
      b.countPerCombo,
      b.refMode,
      JSON.stringify(b.refImages),
      b.total,
      b.note,
      b.unitCost,
      b.creditsCharged,
      JSON.stringify(b.provider),
      b.width,
      b.height,
      b.createdViaApi,
    ],
  );
  return row.created_at;
}

/**
 * Every task in one statement, whatever the batch size: parallel arrays unnested into
 * rows. Prompts travel once and tasks point into them; each task's reference ids travel
 * as a uuid[] literal because unnest would flatten a two-dimensional array.
 */
async function insertTasks(
  m: EntityManager,
  batch: BatchEntity,
  prompts: string[],
  tasks: Task[],
  dispatchCount: number,
): Promise<void> {
  // The first dispatchCount tasks are written queued: the caller enqueues them right after
  // the commit, the rest wait as pending for the generators' feeder (TaskDispatchService).
  await m.query(
    `INSERT INTO tasks (id, batch_id, account_id, seq, prompt, ref_upload_ids, seed, status)
     SELECT t.id, $1, $2, t.seq, ($3::text[])[t.prompt_index], t.refs::uuid[], t.seed,
            CASE WHEN t.seq < $9 THEN 'queued' ELSE 'pending' END
       FROM unnest($4::uuid[], $5::int[], $6::int[], $7::text[], $8::int[]) AS t(id, seq, prompt_index, refs, seed)`,
    [
      batch.id,
      batch.accountId,
      prompts,
      tasks.map((t) => t.id),
      tasks.map((t) => t.seq),
      tasks.map((t) => t.promptIndex + 1),
      tasks.map((t) => `{${t.refUploadIds.join(',')}}`),
      tasks.map((t) => t.seed),
      dispatchCount,
    ],
  );
}

/*
 * The polling endpoint's reads (GET /v1/batches/{id}, its hot path): constant statements for
 * only the columns the response shows, aliased to the field names so no entity is hydrated.
 * Parsing unused columns (four timestamps per task) and TypeORM's hydration of 100 tasks were
 * most of its CPU (bench/findings.md, Polling).
 */
async function selectBatchFields(db: DataSource, accountId: string, batchId: string): Promise<BatchFields | null> {
  const rows: BatchFields[] = await db.query(
    `SELECT id, created_at AS "createdAt", prompts, model, aspect_ratio AS "aspectRatio", resolution, quality,
            background, count_per_combo AS "countPerCombo", ref_mode AS "refMode", ref_images AS "refImages", total,
            note, preview_url AS "previewUrl", created_via_api AS "createdViaApi", status,
            credits_charged AS "creditsCharged", credits_refunded AS "creditsRefunded"
       FROM batches WHERE id = $1 AND account_id = $2`,
    [batchId, accountId],
  );
  return rows[0] ?? null;
}

async function selectTaskViews(db: DataSource, batchId: string): Promise<TaskView[]> {
  return db.query(
    `SELECT id, batch_id AS "batchId", seq, prompt, status, progress, result_url AS "resultUrl", error
       FROM tasks WHERE batch_id = $1 ORDER BY seq`,
    [batchId],
  );
}
