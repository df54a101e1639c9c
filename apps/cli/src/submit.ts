import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { BaseOptions, chunkGroups, chunkPlace, chunkRequest, groupPromptLines, parsePromptsFile, PromptGroup, PromptsFileError } from '@app/prompts-file';
import { BatchDetail, CreateBatchRequest, Kiln, KilnApiError } from '@app/sdk';
import { UsageError } from './cli.errors';
import type { ProgressReporter } from './progress';
import { ChunkResult, ChunkState, SubmissionState, SubmitStateStore } from './submit-state';

export interface SubmitOptions {
  model?: string;
  ratio?: string;
  resolution?: '1K' | '2K' | '4K';
  count?: number;
  ref?: string[];
  refMode?: 'each' | 'combined';
  note?: string;
  seed?: number;
  format?: 'png' | 'jpeg' | 'webp';
  /** economy: the models' economy price, each image within the model's window; standard by default. */
  tier?: 'standard' | 'economy';
  wait?: boolean;
  out?: string;
  /** Submit what the balance and the daily cap cover instead of refusing the whole file. */
  partial?: boolean;
}

export interface SubmitOutcome {
  fingerprint: string;
  stateFile: string;
  outDir: string | null;
  waited: boolean;
  batches: { id: string | null; prompts: number; images: number; result: ChunkResult | null }[];
  images: { total: number; succeeded: number; failed: number; cancelled: number; pending: number };
  credits: { charged: number; refunded: number };
  files: number;
  durationMs: number;
  /** Set when the service refused a create: what it said. */
  refusal: { code: string; message: string; status: number; details?: Record<string, unknown> } | null;
  interrupted: boolean;
}

/** What a prompts file and the options make: the file's prompts grouped by the batch body they need. */
export interface SubmissionPlan {
  /** In the order each option set first appears in the file. */
  groups: PromptGroup<CliBase>[];
  promptCount: number;
  /** Reference files by content hash, in the order given. */
  refs: { file: string; hash: string }[];
  /** Identifies the submission: the same file and options give the same one, on any machine. */
  fingerprint: string;
}

/** The command's options as a batch body's fields (the base every line starts from). */
type CliBase = BaseOptions & { refMode?: 'each' | 'combined'; outputFormat?: 'png' | 'jpeg' | 'webp' };

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** The prompts-file lib's refusals are the command's usage errors: exit 2, the lib's message. */
function asUsage<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof PromptsFileError) throw new UsageError(err.message);
    throw err;
  }
}

export function planSubmission(file: string, options: SubmitOptions): SubmissionPlan {
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (err) {
    throw new UsageError(`Cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const lines = asUsage(() => parsePromptsFile(file, content.toString('utf8')));
  if (options.refMode && !options.ref?.length) throw new UsageError('--ref-mode needs at least one --ref file');
  const refs = (options.ref ?? []).map((ref) => {
    try {
      return { file: ref, hash: sha256(readFileSync(ref)) };
    } catch (err) {
      throw new UsageError(`Cannot read reference ${ref}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  });
  const refMode = refs.length ? (options.refMode ?? 'combined') : undefined;
  const base: CliBase = {
    ...(options.model !== undefined && { model: options.model }),
    ...(options.ratio !== undefined && { aspectRatio: options.ratio }),
    ...(options.resolution !== undefined && { resolution: options.resolution }),
    ...(options.count !== undefined && { countPerCombo: options.count }),
    ...(refMode !== undefined && { refMode }),
    ...(options.note !== undefined && { note: options.note }),
    ...(options.seed !== undefined && { seed: options.seed }),
    ...(options.format !== undefined && { outputFormat: options.format }),
    // Standard is the server's default: sent only for economy, so `--tier standard` is the
    // same submission (and state file entry) as no --tier at all.
    ...(options.tier === 'economy' && { tier: 'economy' as const }),
  };
  const groups = asUsage(() => groupPromptLines(file, lines, base, refMode === 'each' ? refs.length : 1));
  // The command's options as they were before lines could carry their own, so a state file
  // written by an earlier kiln for a plain file still resumes.
  const fingerprint = sha256(JSON.stringify({ prompts: sha256(content), body: base, refs: refs.map((r) => r.hash) })).slice(0, 32);
  return { groups, promptCount: lines.length, refs, fingerprint };
}

/** Whether a group's batches go on the economy tier (--tier economy, or the lines' own "tier"). */
export function groupIsEconomy(plan: SubmissionPlan, group = 0): boolean {
  return plan.groups[group]?.body.tier === 'economy';
}

/** Every group's prompts split by the plan's batch limit, each chunk knowing its group. */
export function chunkPlan(plan: SubmissionPlan, maxImagesPerBatch: number, maxPrompts: number): { group: number; first: number; count: number; images: number }[] {
  return chunkGroups(plan.groups, maxImagesPerBatch, maxPrompts);
}

/** The create body of one chunk of the plan. */
function chunkBody(plan: SubmissionPlan, chunk: { group?: number; first: number; count: number }, refImages: string[]): CreateBatchRequest {
  return { ...chunkRequest(plan.groups, chunk), ...(refImages.length && { refImages }) } as CreateBatchRequest;
}

/**
 * The idempotency key of one batch of a submission: derived from the file, the options and
 * the batch's place in it, so the same command run again (after Ctrl-C, a crash or a lost
 * answer) asks for the same batch and the server answers it instead of charging again.
 */
export function chunkKey(fingerprint: string, chunk: { group?: number; first: number; count: number }): string {
  return `kiln-cli-${fingerprint}-${chunkPlace(chunk)}`;
}

/** When the plan's concurrent limit is taken by batches other than ours, ask again after this. */
const SLOT_RETRY_MS = 2000;

/**
 * `kiln submit`: splits the file by the plan's batch limit, keeps as many batches running as
 * the plan allows, downloads each batch's images as it finishes, and records every step in the
 * state file first, so running the same command again resumes without charging twice.
 */
export async function submit(
  kiln: Kiln,
  file: string,
  options: SubmitOptions,
  progress: ProgressReporter,
  signal: AbortSignal,
): Promise<SubmitOutcome> {
  const started = Date.now();
  const plan = planSubmission(file, options);
  const outDir = options.out ? path.resolve(options.out) : null;
  const store = new SubmitStateStore(outDir ?? process.cwd());
  const [me, catalog] = await Promise.all([kiln.me(), kiln.models()]);
  // Economy batches have their own cap on the plan, apart from standard ones: each tier's
  // batches run in their own pool, so standard batches never wait for an economy slot (nor
  // behind an economy batch followed to its end) when a file mixes the two.
  const slotsOf = (economy: boolean) => (economy ? me.limits.maxConcurrentEconomyBatches : me.limits.maxConcurrentBatches);
  const anyEconomy = plan.groups.some((_, g) => groupIsEconomy(plan, g));

  let state = store.get(plan.fingerprint);
  if (!state) {
    const maxPrompts = (catalog.limits as { maxPrompts?: number }).maxPrompts ?? 1000;
    state = {
      file: path.basename(file),
      startedAt: started,
      refs: {},
      chunks: chunkPlan(plan, me.limits.maxImagesPerBatch, maxPrompts).map((c) => ({
        ...c,
        idempotencyKey: chunkKey(plan.fingerprint, c),
        batchId: null,
        result: null,
        downloaded: false,
      })),
    };
    store.put(plan.fingerprint, state);
  }
  const submission: SubmissionState = state;

  // Upload each reference once per submission: a re-run must send the very same body.
  const missing = plan.refs.filter((r) => !submission.refs[r.hash]);
  if (missing.length) {
    const uploaded = await kiln.uploads.create(missing.map((r) => r.file));
    missing.forEach((r, i) => (submission.refs[r.hash] = uploaded.files[i].url));
    store.save();
  }
  const refImages = plan.refs.map((r) => submission.refs[r.hash]);

  // A plan without economy batches would answer every create concurrent_limit_exceeded, which
  // otherwise means "wait for a slot": refused here instead of waiting for ever.
  const economyHint = options.tier === 'economy' ? 'submit without --tier economy' : 'submit the file without its "tier": "economy" lines';
  let refusal: SubmitOutcome['refusal'] =
    anyEconomy && slotsOf(true) < 1
      ? { code: 'concurrent_limit_exceeded', status: 403, message: `The ${me.user.plan} plan runs no economy batches (maxConcurrentEconomyBatches is 0); ${economyHint}`, details: { tier: 'economy', limit: 0 } }
      : options.partial
        ? null
        : await priceWhole(kiln, plan, submission.chunks.filter((c) => !c.batchId), refImages);

  const live = new Map<ChunkState, BatchDetail>();
  let files = 0;
  const report = () => progress.update(snapshot(submission.chunks, live));
  report();

  const toRun = refusal ? [] : submission.chunks.filter((c) => !(c.result && (c.downloaded || !outDir)));
  const pools = [false, true]
    .map((economy) => ({ economy, concurrency: Math.max(1, slotsOf(economy)), queue: toRun.filter((c) => groupIsEconomy(plan, c.group) === economy), next: 0, slotNoted: false }))
    .filter((p) => p.queue.length > 0);
  type Pool = (typeof pools)[number];

  const runChunk = async (chunk: ChunkState, pool: Pool): Promise<void> => {
    const { economy, concurrency } = pool;
    if (!chunk.batchId) {
      for (;;) {
        try {
          // Not aborted by Ctrl-C: an answered create must reach the state file.
          const created = await kiln.batches.create(chunkBody(plan, chunk, refImages), { idempotencyKey: chunk.idempotencyKey });
          chunk.batchId = created.id;
          store.save();
          break;
        } catch (err) {
          if (err instanceof KilnApiError && err.code === 'concurrent_limit_exceeded' && !signal.aborted) {
            if (!pool.slotNoted) progress.note(`Waiting for a batch slot (the plan runs ${concurrency}${economy ? ' economy batches' : ''} at a time)`);
            pool.slotNoted = true;
            await sleepUnlessAborted(SLOT_RETRY_MS, signal);
            if (signal.aborted) return;
            continue;
          }
          throw err;
        }
      }
    }
    // Without --wait, a batch is followed only while later ones of its tier still wait for its slot.
    if (!options.wait && !pool.queue.some((c) => !c.batchId)) return;
    const detail = chunk.result
      ? await kiln.batches.get(chunk.batchId!)
      : await kiln.batches.wait(chunk.batchId!, {
          signal,
          onProgress: (d) => {
            live.set(chunk, d);
            report();
          },
        });
    chunk.result = resultOf(detail);
    live.delete(chunk);
    store.save();
    report();
    if (outDir) {
      const got = await kiln.batches.download(chunk.batchId!, outDir, { detail, signal });
      files += got.filter((f) => !f.skipped).length;
      chunk.downloaded = true;
      store.save();
    }
  };

  const worker = async (pool: Pool): Promise<void> => {
    while (pool.next < pool.queue.length && !refusal && !signal.aborted) {
      const chunk = pool.queue[pool.next++];
      try {
        await runChunk(chunk, pool);
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof KilnApiError && err.status > 0 && !chunk.batchId) {
          refusal = { code: err.code, message: err.message, status: err.status, ...(err.details && { details: err.details }) };
          return;
        }
        throw err;
      }
    }
  };
  try {
    await Promise.all(pools.flatMap((pool) => Array.from({ length: Math.min(pool.concurrency, pool.queue.length) }, () => worker(pool))));
  } finally {
    store.save();
    progress.stop();
  }

  // A batch created but not followed to its end (interrupted, or no --wait) was charged all
  // the same: the summary asks where it stands now rather than counting it as nothing.
  const now = await Promise.all(submission.chunks.map((c) => c.result ?? (c.batchId ? currentResult(kiln, c.batchId, live.get(c)) : null)));
  const images = { total: 0, succeeded: 0, failed: 0, cancelled: 0, pending: 0 };
  const credits = { charged: 0, refunded: 0 };
  submission.chunks.forEach((c, i) => {
    const r = now[i];
    images.total += c.images;
    if (!r) {
      images.pending += c.images;
      return;
    }
    images.succeeded += r.succeeded;
    images.failed += r.failed;
    images.cancelled += r.cancelled;
    images.pending += r.total - r.succeeded - r.failed - r.cancelled;
    credits.charged += r.creditsCharged;
    credits.refunded += r.creditsRefunded;
  });
  return {
    fingerprint: plan.fingerprint,
    stateFile: store.file,
    outDir,
    waited: !!options.wait,
    batches: submission.chunks.map((c) => ({ id: c.batchId, prompts: c.count, images: c.images, result: c.result })),
    images,
    credits,
    files,
    durationMs: Date.now() - started,
    refusal,
    interrupted: signal.aborted,
  };
}

/** Where a batch stands now; the last progress seen when the service does not answer. */
async function currentResult(kiln: Kiln, batchId: string, lastSeen: BatchDetail | undefined): Promise<ChunkResult | null> {
  try {
    return resultOf(await kiln.batches.get(batchId));
  } catch {
    return lastSeen ? resultOf(lastSeen) : null;
  }
}

/**
 * Prices every batch still to create before any is created: when the balance or the key's
 * daily cap cannot cover them all, the whole file is refused and nothing is charged (rather
 * than charging the first batches and refusing the rest). A refusal other than for money or a
 * busy slot (a bad model, a batch over the plan's limit) refuses it too.
 */
async function priceWhole(kiln: Kiln, plan: SubmissionPlan, toCreate: ChunkState[], refImages: string[]): Promise<SubmitOutcome['refusal']> {
  if (toCreate.length === 0) return null;
  const estimates = [];
  for (const c of toCreate) estimates.push(await kiln.batches.estimate(chunkBody(plan, c, refImages)));
  const other = estimates.map((e) => e.refusal).find((r) => r && !['concurrent_limit_exceeded', 'insufficient_credits', 'daily_credit_cap_exceeded'].includes(r.code));
  if (other) return { code: other.code, message: other.message, status: 400, ...(other.details && { details: other.details }) };
  const needed = estimates.reduce((sum, e) => sum + e.creditsRequired, 0);
  const { balance, dailyCap } = estimates[0];
  const hint = 'nothing was charged; --partial submits what they cover';
  const details = { creditsRequired: needed, balance, batches: toCreate.length };
  if (needed > balance) {
    return { code: 'insufficient_credits', status: 402, message: `The file needs ${needed} credits in ${toCreate.length} batches; the balance is ${balance} (${hint})`, details };
  }
  if (dailyCap && needed > dailyCap.remaining) {
    return {
      code: 'daily_credit_cap_exceeded',
      status: 402,
      message: `The file needs ${needed} credits; this key may spend ${dailyCap.remaining} more today (${hint})`,
      details: { ...details, dailyCap },
    };
  }
  return null;
}

export function resultOf(detail: BatchDetail): ChunkResult {
  const { batch } = detail;
  const counts = batch.counts as typeof batch.counts & { cancelled?: number };
  return {
    status: batch.status,
    total: batch.total,
    succeeded: counts.succeeded,
    failed: counts.failed,
    cancelled: counts.cancelled ?? 0,
    creditsCharged: batch.creditsCharged,
    creditsRefunded: batch.creditsRefunded,
  };
}

function snapshot(chunks: ChunkState[], live: Map<ChunkState, BatchDetail>) {
  let total = 0;
  let finished = 0;
  let failed = 0;
  let credits = 0;
  for (const c of chunks) {
    total += c.images;
    const r = live.has(c) ? resultOf(live.get(c)!) : c.result;
    if (!r) continue;
    finished += r.succeeded + r.failed + r.cancelled;
    failed += r.failed + r.cancelled;
    credits += r.creditsCharged - r.creditsRefunded;
  }
  return { total, finished, failed, credits };
}

function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Estimates every batch the file would make; what the whole would cost against the balance. */
export async function estimateSubmission(kiln: Kiln, file: string, options: SubmitOptions) {
  const plan = planSubmission(file, options);
  const [me, catalog] = await Promise.all([kiln.me(), kiln.models()]);
  const maxPrompts = (catalog.limits as { maxPrompts?: number }).maxPrompts ?? 1000;
  const chunks = chunkPlan(plan, me.limits.maxImagesPerBatch, maxPrompts);
  // Estimates need uploaded reference URLs only to validate them; a placeholder per file would
  // be refused, so references are uploaded (free) as a create would.
  const refImages = plan.refs.length ? (await kiln.uploads.create(plan.refs.map((r) => r.file))).files.map((f) => f.url) : [];
  const estimates = [];
  for (const c of chunks) {
    estimates.push(await kiln.batches.estimate(chunkBody(plan, c, refImages)));
  }
  const creditsRequired = estimates.reduce((sum, e) => sum + e.creditsRequired, 0);
  const balance = me.credits.balance;
  const refusals = estimates.map((e) => e.refusal).filter((r) => r && r.code !== 'concurrent_limit_exceeded');
  // The tier priced (`mixed` when the lines' own "tier" split the file across both), and for
  // economy the longest window of the economy prompts' models: when the last image is due at the latest.
  const economyGroups = plan.groups.filter((_, g) => groupIsEconomy(plan, g));
  const tier = economyGroups.length === 0 ? 'standard' : economyGroups.length === plan.groups.length ? 'economy' : 'mixed';
  const models = new Set(economyGroups.map((g) => g.body.model));
  const windows = catalog.models.filter((m) => models.has(m.key)).map((m) => m.economyWindowHours ?? 0);
  return {
    tier,
    windowHours: economyGroups.length && windows.length ? Math.max(...windows) : null,
    prompts: plan.promptCount,
    images: estimates.reduce((sum, e) => sum + e.total, 0),
    batches: chunks.length,
    creditsRequired,
    balance,
    affordable: creditsRequired <= balance,
    refusal: refusals[0] ?? null,
    estimates,
  };
}
