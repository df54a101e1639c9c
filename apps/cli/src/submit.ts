import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  BaseOptions,
  chunkGroups,
  chunkPlace,
  chunkRequest,
  groupPromptLines,
  parsePromptsFile,
  PromptGroup,
  PromptsFileError,
} from '@app/prompts-file';
import { BatchDetail, BatchResolution, BatchTier, Catalog, CreateBatchRequest, Kiln, KilnApiError, Me } from '@app/sdk';
import { UsageError } from './cli.errors';
import { waitForBatch } from './follow';
import type { ProgressReporter } from './progress';
import { ChunkResult, ChunkState, SubmissionState, SubmitStateStore } from './submit-state';

export interface SubmitOptions {
  model?: string;
  ratio?: string;
  resolution?: BatchResolution;
  count?: number;
  ref?: string[];
  refMode?: 'each' | 'combined';
  note?: string;
  seed?: number;
  format?: 'png' | 'jpeg' | 'webp';
  /** economy: the models' economy price, each image within the model's window; standard by default. */
  tier?: BatchTier;
  wait?: boolean;
  out?: string;
  /** Submit what the balance and the daily cap cover instead of refusing the whole file. */
  partial?: boolean;
  /** Unix ms (--deadline, parseDeadline): each batch's tasks not started by then are cancelled and refunded. */
  deadline?: number;
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
export function chunkPlan(
  plan: SubmissionPlan,
  maxImagesPerBatch: number,
  maxPrompts: number,
): { group: number; first: number; count: number; images: number }[] {
  return chunkGroups(plan.groups, maxImagesPerBatch, maxPrompts);
}

/** The create body of one chunk of the plan. */
function chunkBody(
  plan: SubmissionPlan,
  chunk: { group?: number; first: number; count: number },
  refImages: string[],
  deadline: number | undefined,
): CreateBatchRequest {
  return {
    ...chunkRequest(plan.groups, chunk),
    ...(refImages.length && { refImages }),
    ...(deadline !== undefined && { deadline }),
  } as CreateBatchRequest;
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

/** One run of `kiln submit`: what its steps share, and what its workers add to as they go. */
interface SubmitRun {
  kiln: Kiln;
  plan: SubmissionPlan;
  options: SubmitOptions;
  outDir: string | null;
  store: SubmitStateStore;
  submission: SubmissionState;
  /** The references' uploaded URLs, in the plan's order. */
  refImages: string[];
  progress: ProgressReporter;
  signal: AbortSignal;
  /** The last progress seen of each batch being followed. */
  live: Map<ChunkState, BatchDetail>;
  /** The service's refusal, once there is one: no further batch starts. */
  refusal: SubmitOutcome['refusal'];
  /** Images downloaded that were not on disk yet. */
  files: number;
}

/** The batches of one tier still to run, taken in order by at most `concurrency` workers. */
interface Pool {
  economy: boolean;
  concurrency: number;
  queue: ChunkState[];
  next: number;
  slotNoted: boolean;
}

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
  const submission = submissionState(store, plan, file, started, me, catalog, options);
  const refImages = await uploadedRefs(kiln, plan, submission, store);
  const run: SubmitRun = {
    kiln,
    plan,
    options,
    outDir,
    store,
    submission,
    refImages,
    progress,
    signal,
    live: new Map(),
    refusal: null,
    files: 0,
  };
  run.refusal = await refusalBeforeAny(run, me);
  reportProgress(run);
  await runBatches(run, me.limits);
  return outcomeOf(run, started);
}

/**
 * Economy batches have their own cap on the plan, apart from standard ones: each tier's
 * batches run in their own pool, so standard batches never wait for an economy slot (nor
 * behind an economy batch followed to its end) when a file mixes the two.
 */
function slotsOf(limits: Me['limits'], economy: boolean): number {
  return economy ? limits.maxConcurrentEconomyBatches : limits.maxConcurrentBatches;
}

/** The submission as an earlier run of the same command recorded it, or split afresh and recorded. */
function submissionState(
  store: SubmitStateStore,
  plan: SubmissionPlan,
  file: string,
  started: number,
  me: Me,
  catalog: Catalog,
  options: SubmitOptions,
): SubmissionState {
  // A deadline is not part of the fingerprint: a resumed run keeps the first run's (so a
  // retried create sends the very same body) whatever --deadline it is given.
  const recorded = store.get(plan.fingerprint);
  if (recorded) return recorded;
  const maxPrompts = (catalog.limits as { maxPrompts?: number }).maxPrompts ?? 1000;
  const state: SubmissionState = {
    file: path.basename(file),
    startedAt: started,
    ...(options.deadline !== undefined && { deadline: options.deadline }),
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
  return state;
}

/** The references' URLs, each uploaded once per submission: a re-run must send the very same body. */
async function uploadedRefs(kiln: Kiln, plan: SubmissionPlan, submission: SubmissionState, store: SubmitStateStore): Promise<string[]> {
  const missing = plan.refs.filter((r) => !submission.refs[r.hash]);
  if (missing.length) {
    const uploaded = await kiln.uploads.create(missing.map((r) => r.file));
    missing.forEach((r, i) => (submission.refs[r.hash] = uploaded.files[i].url));
    store.save();
  }
  return plan.refs.map((r) => submission.refs[r.hash]);
}

/** Why the file is refused before any batch is created, if it is (without --partial, the whole file is priced first). */
async function refusalBeforeAny(run: SubmitRun, me: Me): Promise<SubmitOutcome['refusal']> {
  const { plan, options } = run;
  // A plan without economy batches would answer every create concurrent_limit_exceeded, which
  // otherwise means "wait for a slot": refused here instead of waiting for ever.
  if (plan.groups.some((_, g) => groupIsEconomy(plan, g)) && slotsOf(me.limits, true) < 1) {
    const economyHint =
      options.tier === 'economy' ? 'submit without --tier economy' : 'submit the file without its "tier": "economy" lines';
    return {
      code: 'concurrent_limit_exceeded',
      status: 403,
      message: `The ${me.user.plan} plan runs no economy batches (maxConcurrentEconomyBatches is 0); ${economyHint}`,
      details: { tier: 'economy', limit: 0 },
    };
  }
  return options.partial
    ? null
    : await priceWhole(
        run.kiln,
        plan,
        run.submission.chunks.filter((c) => !c.batchId),
        run.refImages,
        run.submission.deadline,
      );
}

function reportProgress(run: SubmitRun): void {
  run.progress.update(snapshot(run.submission.chunks, run.live));
}

/**
 * Runs every batch not done yet (or not downloaded yet, with --out), each tier's in its own
 * pool of as many workers as the plan runs of that tier at once; the state is saved however
 * it ends.
 */
async function runBatches(run: SubmitRun, limits: Me['limits']): Promise<void> {
  const { plan, outDir } = run;
  const toRun = run.refusal ? [] : run.submission.chunks.filter((c) => !(c.result && (c.downloaded || !outDir)));
  const pools: Pool[] = [false, true]
    .map((economy) => ({
      economy,
      concurrency: Math.max(1, slotsOf(limits, economy)),
      queue: toRun.filter((c) => groupIsEconomy(plan, c.group) === economy),
      next: 0,
      slotNoted: false,
    }))
    .filter((p) => p.queue.length > 0);
  try {
    await Promise.all(
      pools.flatMap((pool) => Array.from({ length: Math.min(pool.concurrency, pool.queue.length) }, () => worker(run, pool))),
    );
  } finally {
    run.store.save();
    run.progress.stop();
  }
}

/** Runs the pool's batches one after the other until none is left, the service refuses one or Ctrl-C. */
async function worker(run: SubmitRun, pool: Pool): Promise<void> {
  while (pool.next < pool.queue.length && !run.refusal && !run.signal.aborted) {
    const chunk = pool.queue[pool.next++];
    try {
      await runChunk(run, chunk, pool);
    } catch (err) {
      if (run.signal.aborted) return;
      if (err instanceof KilnApiError && err.status > 0 && !chunk.batchId) {
        run.refusal = { code: err.code, message: err.message, status: err.status, ...(err.details && { details: err.details }) };
        return;
      }
      throw err;
    }
  }
}

/** One batch: created unless recorded, followed to its end when that is wanted, downloaded with --out. */
async function runChunk(run: SubmitRun, chunk: ChunkState, pool: Pool): Promise<void> {
  if (!chunk.batchId && !(await createBatch(run, chunk, pool))) return;
  // Without --wait, a batch is followed only while later ones of its tier still wait for its slot.
  if (!run.options.wait && !pool.queue.some((c) => !c.batchId)) return;
  const detail = await followBatch(run, chunk);
  if (run.outDir) await downloadBatch(run, chunk, detail, run.outDir);
}

/** Creates the chunk's batch and records its id, waiting for a slot while the plan's are taken; false when Ctrl-C ended the wait. */
async function createBatch(run: SubmitRun, chunk: ChunkState, pool: Pool): Promise<boolean> {
  const { kiln, plan, refImages, signal } = run;
  for (;;) {
    try {
      // Not aborted by Ctrl-C: an answered create must reach the state file.
      const created = await kiln.batches.create(chunkBody(plan, chunk, refImages, run.submission.deadline), {
        idempotencyKey: chunk.idempotencyKey,
      });
      chunk.batchId = created.id;
      run.store.save();
      return true;
    } catch (err) {
      if (!(err instanceof KilnApiError && err.code === 'concurrent_limit_exceeded' && !signal.aborted)) throw err;
      if (!pool.slotNoted)
        run.progress.note(
          `Waiting for a batch slot (the plan runs ${pool.concurrency}${pool.economy ? ' economy batches' : ''} at a time)`,
        );
      pool.slotNoted = true;
      await sleepUnlessAborted(SLOT_RETRY_MS, signal);
      if (signal.aborted) return false;
    }
  }
}

/** The batch at its end (as it is, when its result is already recorded), its result recorded. */
async function followBatch(run: SubmitRun, chunk: ChunkState): Promise<BatchDetail> {
  const { kiln, live, signal } = run;
  const detail = chunk.result
    ? await kiln.batches.get(chunk.batchId!)
    : await waitForBatch(kiln, chunk.batchId!, {
        signal,
        onProgress: (d) => {
          live.set(chunk, d);
          reportProgress(run);
        },
      });
  chunk.result = resultOf(detail);
  live.delete(chunk);
  run.store.save();
  reportProgress(run);
  return detail;
}

async function downloadBatch(run: SubmitRun, chunk: ChunkState, detail: BatchDetail, outDir: string): Promise<void> {
  const got = await run.kiln.batches.download(chunk.batchId!, outDir, { detail, signal: run.signal });
  run.files += got.filter((f) => !f.skipped).length;
  chunk.downloaded = true;
  run.store.save();
}

/**
 * The summary. A batch created but not followed to its end (interrupted, or no --wait) was
 * charged all the same: the summary asks where it stands now rather than counting it as nothing.
 */
async function outcomeOf(run: SubmitRun, started: number): Promise<SubmitOutcome> {
  const { kiln, plan, submission, live } = run;
  const now = await Promise.all(
    submission.chunks.map(async (c) => c.result ?? (c.batchId ? currentResult(kiln, c.batchId, live.get(c)) : null)),
  );
  return {
    fingerprint: plan.fingerprint,
    stateFile: run.store.file,
    outDir: run.outDir,
    waited: !!run.options.wait,
    batches: submission.chunks.map((c) => ({ id: c.batchId, prompts: c.count, images: c.images, result: c.result })),
    ...totals(submission.chunks, now),
    files: run.files,
    durationMs: Date.now() - started,
    refusal: run.refusal,
    interrupted: run.signal.aborted,
  };
}

/** Images and credits over every batch, by each one's result (none: all its images pending). */
function totals(chunks: ChunkState[], results: (ChunkResult | null)[]): Pick<SubmitOutcome, 'images' | 'credits'> {
  const images = { total: 0, succeeded: 0, failed: 0, cancelled: 0, pending: 0 };
  const credits = { charged: 0, refunded: 0 };
  chunks.forEach((c, i) => {
    const r = results[i];
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
  return { images, credits };
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
async function priceWhole(
  kiln: Kiln,
  plan: SubmissionPlan,
  toCreate: ChunkState[],
  refImages: string[],
  deadline: number | undefined,
): Promise<SubmitOutcome['refusal']> {
  if (toCreate.length === 0) return null;
  const estimates = [];
  for (const c of toCreate) estimates.push(await kiln.batches.estimate(chunkBody(plan, c, refImages, deadline)));
  const other = estimates
    .map((e) => e.refusal)
    .find((r) => r && !['concurrent_limit_exceeded', 'insufficient_credits', 'daily_credit_cap_exceeded'].includes(r.code));
  if (other) return { code: other.code, message: other.message, status: 400, ...(other.details && { details: other.details }) };
  const needed = estimates.reduce((sum, e) => sum + e.creditsRequired, 0);
  const { balance, dailyCap } = estimates[0];
  const hint = 'nothing was charged; --partial submits what they cover';
  const details = { creditsRequired: needed, balance, batches: toCreate.length };
  if (needed > balance) {
    return {
      code: 'insufficient_credits',
      status: 402,
      message: `The file needs ${needed} credits in ${toCreate.length} batches; the balance is ${balance} (${hint})`,
      details,
    };
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
    estimates.push(await kiln.batches.estimate(chunkBody(plan, c, refImages, options.deadline)));
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
