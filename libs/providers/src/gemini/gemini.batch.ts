import { ProviderError } from '../render.types';
import { throwIfAborted } from '../provider.utils';
import type { UpstreamBatchApi, UpstreamBatchLine, UpstreamBatchRef, UpstreamBatchResult, UpstreamBatchStatus } from '../upstream-batch';
import {
  BatchClientOptions,
  BatchHttp,
  BatchListPage,
  findInList,
  jsonCall,
  pollTrouble,
  rawCall,
  resultFileLines,
  resultOfLine,
  stillWaiting,
  uploadTimeoutMs,
} from '../upstream-batch-http';
import { checkedImage, upstreamPolicies } from '../upstream-http';
import { classifyGeminiError } from './gemini.errors';
import { GeminiProviderConfig, GenerateContentAnswer, geminiRequestBody, inlineImageOf } from './gemini.provider';
import { geminiUsageOf } from './gemini.usage';

export interface GeminiBatchConfig
  extends Pick<GeminiProviderConfig, 'baseUrl' | 'apiKey' | 'model' | 'timeoutMs' | 'allowPrivate' | 'maxImageBytes'>, BatchClientOptions {}

/**
 * Kiln's own cap on one input file: the collector holds the lines in memory while it uploads
 * them (the Files API itself takes up to 2 GB). Lines carry references inline, so a batch
 * of edits fills it sooner.
 */
export const GEMINI_BATCH_MAX_BYTES = 200 * 1024 * 1024;
export const GEMINI_BATCH_MAX_LINES = 50_000;
/** The Files API's resumable upload takes the bytes in chunks; the SDK's size (@google/genai MAX_CHUNK_SIZE). */
const UPLOAD_CHUNK_BYTES = 8 * 1024 * 1024;

/** Gemini batch states (REST `BATCH_STATE_*`; the SDK's `JOB_STATE_*` names accepted too) that are over. */
const ENDED: Record<string, 'completed' | 'expired' | 'failed' | 'cancelled'> = {
  BATCH_STATE_SUCCEEDED: 'completed',
  BATCH_STATE_FAILED: 'failed',
  BATCH_STATE_CANCELLED: 'cancelled',
  BATCH_STATE_EXPIRED: 'expired',
  JOB_STATE_SUCCEEDED: 'completed',
  JOB_STATE_FAILED: 'failed',
  JOB_STATE_CANCELLED: 'cancelled',
  JOB_STATE_EXPIRED: 'expired',
};

/** A batch as the API answers it: a long-running operation whose metadata is the batch (what @google/genai's batchJobFromMldev reads). */
interface GeminiBatchOperation {
  name?: unknown;
  metadata?: {
    displayName?: unknown;
    state?: unknown;
    createTime?: unknown;
    output?: { responsesFile?: unknown; inlinedResponses?: unknown };
    batchStats?: { requestCount?: unknown; successfulRequestCount?: unknown; failedRequestCount?: unknown };
  };
}

interface GeminiOutputLine {
  key?: unknown;
  response?: GenerateContentAnswer;
  error?: { code?: unknown; message?: unknown; status?: unknown };
}

/**
 * Gemini's batch API (economy tier) over `models/{model}:batchGenerateContent`, always with a
 * JSONL input file (`{key, request}` lines, the request as the sync type sends it) uploaded
 * through the Files API's resumable protocol, never inline requests: inline answers come back
 * inside the batch object, which cannot be read a line at a time. The group id is the
 * batch's `displayName` (findBatch lists batches for it); the results are the
 * `responsesFile`, downloaded with `files/{id}:download?alt=media` and read as it arrives.
 */
export class GeminiBatchApi implements UpstreamBatchApi {
  readonly maxLines = GEMINI_BATCH_MAX_LINES;
  readonly maxInputBytes = GEMINI_BATCH_MAX_BYTES;
  readonly pollIntervalMs: number;
  private readonly baseUrl: string;
  private readonly http: BatchHttp;

  constructor(private readonly config: GeminiBatchConfig) {
    this.baseUrl = config.baseUrl.replace(/\/+$/, '');
    this.pollIntervalMs = config.pollIntervalMs;
    this.http = {
      policy: upstreamPolicies(this.baseUrl, config.allowPrivate).api,
      headers: { 'x-goog-api-key': config.apiKey },
      apiKey: config.apiKey,
      timeoutMs: config.timeoutMs,
      classify: classifyGeminiError,
    };
  }

  encodeLine(line: UpstreamBatchLine): string {
    return JSON.stringify({ key: line.key, request: geminiRequestBody(this.config.model, line.request) });
  }

  /**
   * The Files API's resumable upload, as @google/genai's files.upload: a start call to
   * `upload/v1beta/files` answers the upload URL (x-goog-upload-url), then the bytes go in
   * 8 MB chunks, the last one `upload, finalize`. The upload URL's path is used on the route's
   * own origin (as the SDK does), never a host the answer names.
   */
  async uploadInput(lines: readonly string[], group: string, signal?: AbortSignal): Promise<{ inputId: string }> {
    throwIfAborted(signal);
    const body = Buffer.from(lines.join('\n') + '\n');
    const start = await this.raw(
      this.uploadStartUrl(),
      {
        'content-type': 'application/json',
        'x-goog-upload-protocol': 'resumable',
        'x-goog-upload-command': 'start',
        'x-goog-upload-header-content-length': String(body.length),
        'x-goog-upload-header-content-type': 'application/jsonl',
      },
      Buffer.from(
        JSON.stringify({ file: { displayName: `kiln-${group}`, mimeType: 'application/jsonl', sizeBytes: String(body.length) } }),
      ),
      this.config.timeoutMs,
      signal,
    );
    const uploadUrl = start.headers.get('x-goog-upload-url');
    if (!uploadUrl) throw new ProviderError('invalid_response', 'The Files API answered the upload start without an upload URL');
    const target = this.onOwnOrigin(uploadUrl);
    let answer: { headers: Headers; text: string } | null = null;
    for (let offset = 0; offset < body.length || offset === 0; offset += UPLOAD_CHUNK_BYTES) {
      const chunk = body.subarray(offset, offset + UPLOAD_CHUNK_BYTES);
      const last = offset + UPLOAD_CHUNK_BYTES >= body.length;
      answer = await this.raw(
        target,
        { 'x-goog-upload-command': last ? 'upload, finalize' : 'upload', 'x-goog-upload-offset': String(offset) },
        chunk,
        uploadTimeoutMs(this.config.timeoutMs, chunk.length),
        signal,
      );
      if (last) break;
    }
    let file: { file?: { name?: unknown } };
    try {
      file = JSON.parse(answer!.text) as { file?: { name?: unknown } };
    } catch {
      throw new ProviderError('invalid_response', 'The Files API answered the upload with something other than JSON');
    }
    if (typeof file?.file?.name !== 'string' || !file.file.name)
      throw new ProviderError('invalid_response', 'The Files API answered the upload without a file name');
    return { inputId: file.file.name };
  }

  async createBatch(inputId: string, group: string, signal?: AbortSignal): Promise<UpstreamBatchRef> {
    throwIfAborted(signal);
    const url = `${this.baseUrl}/models/${encodeURIComponent(this.config.model)}:batchGenerateContent`;
    const body = Buffer.from(JSON.stringify({ batch: { inputConfig: { fileName: inputId }, displayName: group } }));
    const op = (await jsonCall(this.http, { method: 'POST', url, body, contentType: 'application/json' }, signal)) as GeminiBatchOperation;
    if (typeof op?.name !== 'string' || !op.name.startsWith('batches/'))
      throw new ProviderError('invalid_response', 'The batch API answered the create without a batch name');
    return { batchId: op.name, state: { inputFileName: inputId } };
  }

  /** Lists batches (newest first) until one's displayName is the group id, within the window (findInList). */
  async findBatch(group: string, signal?: AbortSignal): Promise<UpstreamBatchRef | null> {
    const match = (op: GeminiBatchOperation): UpstreamBatchRef | null =>
      op?.metadata?.displayName === group && typeof op.name === 'string' ? { batchId: op.name, state: {} } : null;
    return findInList(
      this.http,
      this.config,
      { url: `${this.baseUrl}/batches`, params: { size: 'pageSize', cursor: 'pageToken' }, read: listPage, match },
      signal,
    );
  }

  async poll(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<UpstreamBatchStatus> {
    let op: GeminiBatchOperation;
    try {
      op = (await jsonCall(this.http, { method: 'GET', url: `${this.baseUrl}/${batchPath(ref.batchId)}` }, signal)) as GeminiBatchOperation;
    } catch (err) {
      return pollTrouble(err);
    }
    const state = typeof op?.metadata?.state === 'string' ? op.metadata.state : 'unknown';
    const outcome = ENDED[state];
    if (!outcome) {
      const stats = op?.metadata?.batchStats;
      return stillWaiting(
        state,
        [stats?.successfulRequestCount, stats?.failedRequestCount].map(Number).filter((n) => Number.isFinite(n)),
      );
    }
    const found: Record<string, string> = {};
    const file = op.metadata?.output?.responsesFile;
    if (typeof file === 'string' && file) found.responsesFile = file;
    return { state: 'ended', upstreamStatus: state, outcome, found };
  }

  /** The responsesFile's lines as they arrive; a batch that ended without one delivers nothing (Kiln refunds its lines). */
  async *results(
    ref: UpstreamBatchRef,
    ended: Extract<UpstreamBatchStatus, { state: 'ended' }>,
    signal?: AbortSignal,
  ): AsyncIterable<UpstreamBatchResult> {
    const file = ended.found.responsesFile;
    if (!file) return;
    const url = `${this.baseUrl}/${filePath(file)}:download?alt=media`;
    for await (const line of resultFileLines(this.http, url, this.config.maxImageBytes, this.maxLines, signal)) {
      const result = await resultOfLine<GeminiOutputLine>(line, 'key', this.config.maxImageBytes, (parsed) => this.lineResult(parsed));
      if (result) yield result;
    }
  }

  async cancel(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<void> {
    try {
      await jsonCall(
        this.http,
        {
          method: 'POST',
          url: `${this.baseUrl}/${batchPath(ref.batchId)}:cancel`,
          body: Buffer.from('{}'),
          contentType: 'application/json',
        },
        signal,
      );
    } catch (err) {
      // A batch already over cannot be cancelled (FAILED_PRECONDITION): nothing left to stop.
      if (err instanceof ProviderError && (err.status === 400 || err.status === 409) && err.upstreamCode === 'FAILED_PRECONDITION') return;
      throw err;
    }
  }

  private async lineResult(line: GeminiOutputLine): Promise<UpstreamBatchResult | null> {
    if (typeof line?.key !== 'string') return null;
    const key = line.key;
    if (line.error && typeof line.error === 'object') {
      const status = httpStatusOf(line.error.code);
      return {
        key,
        ok: false,
        error: classifyGeminiError(
          { status, headers: new Headers(), text: JSON.stringify({ error: line.error }) },
          { apiKey: this.config.apiKey },
        ),
      };
    }
    try {
      const image = await checkedImage(inlineImageOf(line.response ?? {}), this.config.maxImageBytes);
      // The line's usageMetadata prices the image, as on a render (at the rule's economy factor).
      const usage = geminiUsageOf(line.response);
      return { key, ok: true, image: usage ? { ...image, usage } : image };
    } catch (err) {
      if (err instanceof ProviderError) return { key, ok: false, error: err };
      throw err;
    }
  }

  /** `{origin}/upload/v1beta/files` for a base URL `{origin}/v1beta` (the SDK's `upload/{api_version}/files`). */
  private uploadStartUrl(): string {
    const url = new URL(this.baseUrl);
    const path = url.pathname.replace(/\/+$/, '');
    const m = /^(.*)\/([^/]+)$/.exec(path);
    url.pathname = m ? `${m[1]}/upload/${m[2]}/files` : '/upload/files';
    return url.toString();
  }

  private onOwnOrigin(uploadUrl: string): string {
    let named: URL;
    try {
      named = new URL(uploadUrl, this.baseUrl);
    } catch {
      throw new ProviderError('invalid_response', 'The Files API answered an upload URL that is not a URL');
    }
    return `${new URL(this.baseUrl).origin}${named.pathname}${named.search}`;
  }

  /** A POST whose answer headers matter (the upload protocol's), classified like every call. */
  private raw(
    url: string,
    headers: Record<string, string>,
    body: Buffer,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ headers: Headers; text: string }> {
    return rawCall(this.http, { method: 'POST', url, headers, body, timeoutMs }, signal);
  }
}

/** A page of GET /batches: operations, `nextPageToken` the next page's cursor, `createTime` an RFC 3339 time. */
function listPage(answer: unknown): BatchListPage<GeminiBatchOperation> {
  const list = answer as { operations?: unknown; nextPageToken?: unknown };
  const ops = Array.isArray(list?.operations) ? (list.operations as GeminiBatchOperation[]) : [];
  const next = typeof list?.nextPageToken === 'string' && list.nextPageToken ? list.nextPageToken : null;
  const lastCreated = ops[ops.length - 1]?.metadata?.createTime;
  return { items: ops, next, lastCreatedMs: Date.parse(typeof lastCreated === 'string' ? lastCreated : '') };
}

/** `batches/abc` -> `batches/abc` with each segment escaped (the SDK's `batches/{name}`). */
function batchPath(name: string): string {
  const id = name.replace(/^batches\//, '');
  return `batches/${encodeURIComponent(id)}`;
}

function filePath(name: string): string {
  return `files/${encodeURIComponent(name.replace(/^files\//, ''))}`;
}

/**
 * A line's error is a google.rpc.Status, whose code is a gRPC code (3 INVALID_ARGUMENT,
 * 8 RESOURCE_EXHAUSTED, 13 INTERNAL...): the HTTP status the sync API answers for it, which
 * the type's classification reads.
 */
const GRPC_TO_HTTP: Record<number, number> = { 3: 400, 4: 504, 5: 404, 7: 403, 8: 429, 9: 400, 11: 400, 13: 500, 14: 503, 16: 401 };

function httpStatusOf(code: unknown): number {
  if (typeof code !== 'number') return 500;
  if (code >= 400 && code < 600) return code;
  return GRPC_TO_HTTP[code] ?? 500;
}
