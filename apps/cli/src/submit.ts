import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { BatchDetail, CreateBatchRequest, Kiln, KilnApiError } from '@app/sdk';
import { UsageError } from './cli.errors';
import type { ProgressReporter } from './progress';
import { parsePromptsFile } from './prompts-file';
import { ChunkResult, ChunkState, SubmissionState, SubmitStateStore } from './submit-state';

export interface SubmitOptions {
  model: string;
  ratio?: string;
  resolution?: '1K' | '2K' | '4K';
  count?: number;
  ref?: string[];
  refMode?: 'each' | 'combined';
  note?: string;
  wait?: boolean;
  out?: string;
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

/** What a prompts file and the options make: the batch body less its prompts, and the file's prompts. */
export interface SubmissionPlan {
  prompts: string[];
  body: Omit<CreateBatchRequest, 'prompts' | 'refImages'>;
  /** Reference files by content hash, in the order given. */
  refs: { file: string; hash: string }[];
  imagesPerPrompt: number;
  /** Identifies the submission: the same file and options give the same one, on any machine. */
  fingerprint: string;
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

export function planSubmission(file: string, options: SubmitOptions): SubmissionPlan {
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (err) {
    throw new UsageError(`Cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const prompts = parsePromptsFile(file, content.toString('utf8'));
  if (options.refMode && !options.ref?.length) throw new UsageError('--ref-mode needs at least one --ref file');
  const refs = (options.ref ?? []).map((ref) => {
    try {
      return { file: ref, hash: sha256(readFileSync(ref)) };
    } catch (err) {
      throw new UsageError(`Cannot read reference ${ref}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  });
  const refMode = refs.length ? (options.refMode ?? 'combined') : undefined;
  const body: SubmissionPlan['body'] = {
    model: options.model,
    ...(options.ratio !== undefined && { aspectRatio: options.ratio }),
    ...(options.resolution !== undefined && { resolution: options.resolution }),
    ...(options.count !== undefined && { countPerCombo: options.count }),
    ...(refMode !== undefined && { refMode }),
    ...(options.note !== undefined && { note: options.note }),
  };
  const imagesPerPrompt = (options.count ?? 1) * (refMode === 'each' ? refs.length : 1);
  const fingerprint = sha256(JSON.stringify({ prompts: sha256(content), body, refs: refs.map((r) => r.hash) })).slice(0, 32);
  return { prompts, body, refs, imagesPerPrompt, fingerprint };
}

/** Prompts per batch: as many as the plan's batch limit allows, at least one (the server then says why not). */
export function chunkPrompts(promptCount: number, imagesPerPrompt: number, maxImagesPerBatch: number, maxPrompts: number): { first: number; count: number }[] {
  const per = Math.max(1, Math.min(maxPrompts, Math.floor(maxImagesPerBatch / imagesPerPrompt)));
  const chunks: { first: number; count: number }[] = [];
  for (let first = 0; first < promptCount; first += per) chunks.push({ first, count: Math.min(per, promptCount - first) });
  return chunks;
}

/**
 * The idempotency key of one batch of a submission: derived from the file, the options and
 * the batch's place in it, so the same command run again (after Ctrl-C, a crash or a lost
 * answer) asks for the same batch and the server answers it instead of charging again.
 */
export function chunkKey(fingerprint: string, chunk: { first: number; count: number }): string {
  return `kiln-cli-${fingerprint}-${chunk.first}-${chunk.count}`;
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
  const concurrency = Math.max(1, me.limits.maxConcurrentBatches);

  let state = store.get(plan.fingerprint);
  if (!state) {
    const maxPrompts = (catalog.limits as { maxPrompts?: number }).maxPrompts ?? 1000;
    state = {
      file: path.basename(file),
      startedAt: started,
      refs: {},
      chunks: chunkPrompts(plan.prompts.length, plan.imagesPerPrompt, me.limits.maxImagesPerBatch, maxPrompts).map((c) => ({
        ...c,
        images: c.count * plan.imagesPerPrompt,
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

  const live = new Map<ChunkState, BatchDetail>();
  let files = 0;
  const report = () => progress.update(snapshot(submission.chunks, live));
  report();

  let refusal: SubmitOutcome['refusal'] = null;
  const queue = submission.chunks.filter((c) => !(c.result && (c.downloaded || !outDir)));
  const remainingToCreate = () => queue.some((c) => !c.batchId);
  let slotNoted = false;

  const runChunk = async (chunk: ChunkState): Promise<void> => {
    if (!chunk.batchId) {
      for (;;) {
        try {
          // Not aborted by Ctrl-C: an answered create must reach the state file.
          const created = await kiln.batches.create(
            { ...plan.body, prompts: plan.prompts.slice(chunk.first, chunk.first + chunk.count), ...(refImages.length && { refImages }) },
            { idempotencyKey: chunk.idempotencyKey },
          );
          chunk.batchId = created.id;
          store.save();
          break;
        } catch (err) {
          if (err instanceof KilnApiError && err.code === 'concurrent_limit_exceeded' && !signal.aborted) {
            if (!slotNoted) progress.note(`Waiting for a batch slot (the plan runs ${concurrency} at a time)`);
            slotNoted = true;
            await sleepUnlessAborted(SLOT_RETRY_MS, signal);
            if (signal.aborted) return;
            continue;
          }
          throw err;
        }
      }
    }
    // Without --wait, a batch is followed only while later ones still wait for its slot.
    if (!options.wait && !remainingToCreate()) return;
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

  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < queue.length && !refusal && !signal.aborted) {
      const chunk = queue[next++];
      try {
        await runChunk(chunk);
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
    await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(1, queue.length)) }, worker));
  } finally {
    store.save();
    progress.stop();
  }

  const images = { total: 0, succeeded: 0, failed: 0, cancelled: 0, pending: 0 };
  const credits = { charged: 0, refunded: 0 };
  for (const c of submission.chunks) {
    images.total += c.images;
    if (!c.result) {
      images.pending += c.images;
      continue;
    }
    images.succeeded += c.result.succeeded;
    images.failed += c.result.failed;
    images.cancelled += c.result.cancelled;
    images.pending += c.result.total - c.result.succeeded - c.result.failed - c.result.cancelled;
    credits.charged += c.result.creditsCharged;
    credits.refunded += c.result.creditsRefunded;
  }
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
  const chunks = chunkPrompts(plan.prompts.length, plan.imagesPerPrompt, me.limits.maxImagesPerBatch, maxPrompts);
  // Estimates need uploaded reference URLs only to validate them; a placeholder per file would
  // be refused, so references are uploaded (free) as a create would.
  const refImages = plan.refs.length ? (await kiln.uploads.create(plan.refs.map((r) => r.file))).files.map((f) => f.url) : [];
  const estimates = [];
  for (const c of chunks) {
    estimates.push(await kiln.batches.estimate({ ...plan.body, prompts: plan.prompts.slice(c.first, c.first + c.count), ...(refImages.length && { refImages }) }));
  }
  const creditsRequired = estimates.reduce((sum, e) => sum + e.creditsRequired, 0);
  const balance = me.credits.balance;
  const refusals = estimates.map((e) => e.refusal).filter((r) => r && r.code !== 'concurrent_limit_exceeded');
  return {
    prompts: plan.prompts.length,
    images: estimates.reduce((sum, e) => sum + e.total, 0),
    batches: chunks.length,
    creditsRequired,
    balance,
    affordable: creditsRequired <= balance,
    refusal: refusals[0] ?? null,
    estimates,
  };
}
