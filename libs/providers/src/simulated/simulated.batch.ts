import { createHash, randomUUID } from 'node:crypto';
import { ProviderError, RenderResult } from '../render.types';
import { throwIfAborted } from '../provider.utils';
import type {
  BatchObjectStore,
  RouteBatchSettings,
  UpstreamBatchApi,
  UpstreamBatchLine,
  UpstreamBatchRef,
  UpstreamBatchResult,
  UpstreamBatchStatus,
} from '../upstream-batch';
import { cachedPng, scaledSize } from './simulated.provider';

/**
 * Prompt markers the simulated batch API obeys, for tests and demos: a line whose prompt
 * contains one ends that way, whatever the route's failureRate.
 */
export const SIMULATED_BATCH_MARKERS = {
  /** The line is refused (content_refused). */
  refuse: '[sim:refuse]',
  /** The line fails (upstream_error, not retryable). */
  fail: '[sim:fail]',
  /** The whole batch expires; lines carrying this marker are the ones it never ran. */
  expire: '[sim:expire]',
} as const;

/**
 * Where the test-only hook SIMULATED_BATCH_HANG_AT may stop the API for good (once per
 * group), so a test can SIGKILL the generator there: before and after the input's upload,
 * after the batch's create (before Kiln records it), at a poll, and half-way through the
 * results.
 */
export const SIMULATED_BATCH_HANG_STEPS = ['before-upload', 'after-upload', 'after-create', 'poll', 'mid-results'] as const;
export type SimulatedBatchHangStep = (typeof SIMULATED_BATCH_HANG_STEPS)[number];

interface Manifest {
  batchId: string;
  inputId: string;
  group: string;
  createdAt: number;
  endsAt: number;
  cancelled: boolean;
}

interface EncodedLine {
  custom_id: string;
  body: { prompt: string; seed: number; width: number; height: number };
}

export interface SimulatedBatchConfig {
  delayMs: number;
  failureRate: number;
  pollIntervalMs: number;
}

/**
 * The simulated type's local batch API (economy tier offline, in tests and in the bench). Its
 * state (inputs, batches, the group each batch was made for) lives in the BatchObjectStore the
 * generator passes (Kiln's object storage under `upstream-batches/simulated/`), so it survives a
 * generator crash and every generator sees the same batches, as with a real upstream. A batch
 * ends `delayMs` after its create; its results are computed from its input when read, in a
 * shuffled order, with a line failing at `failureRate` (drawn from the line's key, so a second
 * read answers the same) or as its prompt's marker says (SIMULATED_BATCH_MARKERS). Each
 * created batch's manifest names its input, so what was submitted, and how often, can be
 * counted from the store (tests do).
 */
export class SimulatedBatchApi implements UpstreamBatchApi {
  readonly maxLines = 50_000;
  readonly maxInputBytes = 100 * 1024 * 1024;
  readonly pollIntervalMs: number;

  constructor(
    private readonly config: SimulatedBatchConfig,
    private readonly store: BatchObjectStore,
    private readonly hangAt: string | null = null,
  ) {
    this.pollIntervalMs = config.pollIntervalMs;
  }

  static of(
    route: { failureRate?: number },
    settings: RouteBatchSettings,
    store: BatchObjectStore | undefined,
    hangAt: string | null | undefined,
  ): SimulatedBatchApi {
    if (!store) throw new ProviderError('not_configured', 'The simulated batch API needs the object store (the generator passes it)');
    return new SimulatedBatchApi(
      { delayMs: settings.delayMs ?? 0, failureRate: route.failureRate ?? 0, pollIntervalMs: settings.pollIntervalMs },
      store,
      hangAt ?? null,
    );
  }

  encodeLine(line: UpstreamBatchLine): string {
    const { prompt, seed, width, height } = line.request;
    const encoded: EncodedLine = { custom_id: line.key, body: { prompt, seed, width, height } };
    return JSON.stringify(encoded);
  }

  async uploadInput(lines: readonly string[], group: string, signal?: AbortSignal): Promise<{ inputId: string }> {
    throwIfAborted(signal);
    await this.hang('before-upload', group);
    const inputId = `sim-input-${randomUUID()}`;
    await this.store.put(inputKey(inputId), Buffer.from(lines.join('\n')));
    await this.hang('after-upload', group);
    return { inputId };
  }

  async createBatch(inputId: string, group: string, signal?: AbortSignal): Promise<UpstreamBatchRef> {
    throwIfAborted(signal);
    if (!(await this.store.get(inputKey(inputId))))
      throw new ProviderError('upstream_error', `Simulated batch API: no input ${inputId}`, { retryable: false, status: 404 });
    const now = Date.now();
    const manifest: Manifest = {
      batchId: `sim-batch-${randomUUID()}`,
      inputId,
      group,
      createdAt: now,
      endsAt: now + this.config.delayMs,
      cancelled: false,
    };
    await this.store.put(batchKey(manifest.batchId), Buffer.from(JSON.stringify(manifest)));
    await this.store.put(groupKey(group), Buffer.from(JSON.stringify({ batchId: manifest.batchId })));
    await this.hang('after-create', group);
    return refOf(manifest);
  }

  async findBatch(group: string, signal?: AbortSignal): Promise<UpstreamBatchRef | null> {
    throwIfAborted(signal);
    const found = await this.store.get(groupKey(group));
    if (!found) return null;
    const manifest = await this.manifest((JSON.parse(found.toString()) as { batchId: string }).batchId);
    return manifest ? refOf(manifest) : null;
  }

  async poll(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<UpstreamBatchStatus> {
    throwIfAborted(signal);
    const manifest = await this.manifest(ref.batchId);
    if (!manifest)
      throw new ProviderError('upstream_error', `Simulated batch API: no batch ${ref.batchId}`, { retryable: false, status: 404 });
    await this.hang('poll', manifest.group);
    const found = { inputId: manifest.inputId };
    if (manifest.cancelled) return { state: 'ended', upstreamStatus: 'cancelled', outcome: 'cancelled', found };
    if (Date.now() < manifest.endsAt) return { state: 'waiting', upstreamStatus: 'in_progress' };
    const lines = await this.lines(manifest.inputId);
    if (lines.some((l) => l.body.prompt.includes(SIMULATED_BATCH_MARKERS.expire)))
      return { state: 'ended', upstreamStatus: 'expired', outcome: 'expired', found };
    return { state: 'ended', upstreamStatus: 'completed', outcome: 'completed', found };
  }

  async *results(
    ref: UpstreamBatchRef,
    ended: Extract<UpstreamBatchStatus, { state: 'ended' }>,
    signal?: AbortSignal,
  ): AsyncIterable<UpstreamBatchResult> {
    const manifest = await this.manifest(ref.batchId);
    if (!manifest)
      throw new ProviderError('upstream_error', `Simulated batch API: no batch ${ref.batchId}`, { retryable: false, status: 404 });
    // Any order, as real upstreams write them: sorted by a hash of the key and the batch. Each
    // line is parsed as it is answered: only the input's raw lines and their order are held
    // while the reader stores images (10,000 parsed lines per batch were heap for its whole read).
    const body = await this.inputBody(ended.found.inputId ?? manifest.inputId);
    const raw = body.split('\n').filter((l) => l.length > 0);
    const keep = (l: EncodedLine): boolean =>
      ended.outcome === 'completed' || (ended.outcome === 'expired' && !l.body.prompt.includes(SIMULATED_BATCH_MARKERS.expire));
    const order = raw
      .map((l, i) => ({ i, order: unitHash(`${manifest.batchId}:${(JSON.parse(l) as EncodedLine).custom_id}`) }))
      .sort((a, b) => a.order - b.order)
      .map((x) => x.i);
    const half = Math.floor(order.length / 2);
    for (let n = 0; n < order.length; n++) {
      throwIfAborted(signal);
      if (n === half && half > 0) await this.hang('mid-results', manifest.group);
      const line = JSON.parse(raw[order[n]]) as EncodedLine;
      if (keep(line)) yield await this.outcome(line);
    }
  }

  async cancel(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    const manifest = await this.manifest(ref.batchId);
    if (!manifest || Date.now() >= manifest.endsAt) return;
    await this.store.put(batchKey(manifest.batchId), Buffer.from(JSON.stringify({ ...manifest, cancelled: true })));
  }

  private async outcome(line: EncodedLine): Promise<UpstreamBatchResult> {
    const { prompt, width, height } = line.body;
    if (prompt.includes(SIMULATED_BATCH_MARKERS.refuse)) {
      return {
        key: line.custom_id,
        ok: false,
        error: new ProviderError('content_refused', 'Simulated content refusal', { retryable: false, status: 400 }),
      };
    }
    if (prompt.includes(SIMULATED_BATCH_MARKERS.fail) || unitHash(`failure:${line.custom_id}`) < this.config.failureRate) {
      return {
        key: line.custom_id,
        ok: false,
        error: new ProviderError('upstream_error', 'Simulated upstream failure', { retryable: false }),
      };
    }
    const size = scaledSize(width, height);
    const image: RenderResult = {
      data: await cachedPng(size.width, size.height),
      contentType: 'image/png',
      width: size.width,
      height: size.height,
    };
    return { key: line.custom_id, ok: true, image };
  }

  private async manifest(batchId: string): Promise<Manifest | null> {
    const body = await this.store.get(batchKey(batchId));
    return body ? (JSON.parse(body.toString()) as Manifest) : null;
  }

  private async lines(inputId: string): Promise<EncodedLine[]> {
    return (await this.inputBody(inputId))
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as EncodedLine);
  }

  private async inputBody(inputId: string): Promise<string> {
    const body = await this.store.get(inputKey(inputId));
    if (!body) throw new ProviderError('upstream_error', `Simulated batch API: no input ${inputId}`, { retryable: false, status: 404 });
    return body.toString();
  }

  /** The test-only hook: at its step, once per group (a marker says it hung), never returns. */
  private async hang(step: SimulatedBatchHangStep, group: string): Promise<void> {
    if (this.hangAt !== step) return;
    const marker = `simulated/hung/${step}-${group}`;
    if (await this.store.get(marker)) return;
    await this.store.put(marker, Buffer.from(String(Date.now())));
    await new Promise<never>(() => undefined);
  }
}

const inputKey = (inputId: string): string => `simulated/inputs/${inputId}.jsonl`;
const batchKey = (batchId: string): string => `simulated/batches/${batchId}.json`;
const groupKey = (group: string): string => `simulated/groups/${group}.json`;

function refOf(manifest: Manifest): UpstreamBatchRef {
  return { batchId: manifest.batchId, state: { inputId: manifest.inputId } };
}

/** A stable number in [0, 1) for a string. */
function unitHash(s: string): number {
  return createHash('sha256').update(s).digest().readUInt32BE(0) / 2 ** 32;
}
