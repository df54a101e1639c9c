import { randomBytes } from 'node:crypto';
import type { EgressPolicy } from '@app/egress';
import { ProviderError, RenderResult } from '../render.types';
import { throwIfAborted } from '../provider.utils';
import type { UpstreamBatchApi, UpstreamBatchLine, UpstreamBatchRef, UpstreamBatchResult, UpstreamBatchStatus } from '../upstream-batch';
import {
  BatchClientOptions,
  BatchHttp,
  BatchListPage,
  findInList,
  jsonCall,
  pollTrouble,
  resultFileLines,
  resultOfLine,
  stillWaiting,
  uploadTimeoutMs,
} from '../upstream-batch-http';
import { checkedImage, downloadImage, upstreamPolicies } from '../upstream-http';
import { classifyOpenAiError } from './openai.errors';
import { openAiGenerationsBody, OpenAiProviderConfig, parseFirstImage } from './openai.provider';

export interface OpenAiBatchConfig
  extends
    Pick<
      OpenAiProviderConfig,
      'baseUrl' | 'apiKey' | 'model' | 'sizeMap' | 'upstreamSize' | 'timeoutMs' | 'allowPrivate' | 'maxImageBytes'
    >,
    BatchClientOptions {}

/** OpenAI's limits per batch input file (Batch API guide, openai-node BatchCreateParams). */
export const OPENAI_BATCH_MAX_LINES = 50_000;
export const OPENAI_BATCH_MAX_BYTES = 200 * 1024 * 1024;
/** The metadata key carrying Kiln's group id on the upstream batch (findBatch reads it back). */
export const OPENAI_BATCH_GROUP_KEY = 'kiln_group';
const ENDPOINT = '/v1/images/generations';

/** Statuses of an OpenAI batch that are over, and what each means for the lines not delivered. */
const ENDED: Record<string, 'completed' | 'expired' | 'failed' | 'cancelled'> = {
  completed: 'completed',
  expired: 'expired',
  failed: 'failed',
  cancelled: 'cancelled',
};

/** Line errors that say the line never ran: Kiln fails and refunds those itself, as undelivered. */
const NEVER_RAN_CODES = ['batch_expired', 'batch_cancelled'];

interface OpenAiBatchObject {
  id?: unknown;
  status?: unknown;
  created_at?: unknown;
  metadata?: Record<string, unknown> | null;
  input_file_id?: unknown;
  output_file_id?: unknown;
  error_file_id?: unknown;
  request_counts?: { total?: unknown; completed?: unknown; failed?: unknown };
}

interface OpenAiBatchOutputLine {
  custom_id?: unknown;
  response?: { status_code?: unknown; body?: unknown } | null;
  error?: { code?: unknown; message?: unknown } | null;
}

/**
 * The OpenAI Batch API (economy tier): each task a JSONL line for /v1/images/generations,
 * the lines uploaded as a `purpose=batch` file, one batch created over it with Kiln's group id
 * in its metadata, polled with GET /batches/{id}, and its output and error files read line
 * by line as they arrive (a file of 50,000 images is never held whole).
 *
 * Tasks with reference images are not batchable here: /v1/images/edits takes its images as
 * multipart file parts (openai-node 6.30.1 `ImageEditParams.image: Uploadable`), which a JSONL
 * line cannot carry, and no JSON form of them is confirmed; `encodeLine` refuses them
 * (bad_request) so they are never sent half-made.
 */
export class OpenAiBatchApi implements UpstreamBatchApi {
  readonly maxLines = OPENAI_BATCH_MAX_LINES;
  readonly maxInputBytes = OPENAI_BATCH_MAX_BYTES;
  readonly pollIntervalMs: number;
  private readonly baseUrl: string;
  private readonly http: BatchHttp;
  private readonly downloadPolicy: EgressPolicy;

  constructor(private readonly config: OpenAiBatchConfig) {
    this.baseUrl = config.baseUrl.replace(/\/+$/, '');
    this.pollIntervalMs = config.pollIntervalMs;
    const policies = upstreamPolicies(this.baseUrl, config.allowPrivate);
    this.downloadPolicy = policies.download;
    this.http = {
      policy: policies.api,
      headers: { authorization: `Bearer ${config.apiKey}` },
      apiKey: config.apiKey,
      timeoutMs: config.timeoutMs,
      classify: classifyOpenAiError,
    };
  }

  /** Why a task cannot go through this batch API, or null: the collector keeps such tasks out. */
  static unbatchable(line: UpstreamBatchLine): string | null {
    return line.request.references.length > 0
      ? 'OpenAI batch lines are JSON and cannot carry reference images (/v1/images/edits takes them as multipart files)'
      : null;
  }

  encodeLine(line: UpstreamBatchLine): string {
    const why = OpenAiBatchApi.unbatchable(line);
    if (why) throw new ProviderError('bad_request', why);
    return JSON.stringify({ custom_id: line.key, method: 'POST', url: ENDPOINT, body: openAiGenerationsBody(this.config, line.request) });
  }

  async uploadInput(lines: readonly string[], group: string, signal?: AbortSignal): Promise<{ inputId: string }> {
    throwIfAborted(signal);
    const boundary = `----kiln-batch-${randomBytes(12).toString('hex')}`;
    // Built by hand rather than with FormData: the input may be 200 MB, copied once here.
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n`),
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="kiln-${safeName(group)}.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n`,
      ),
      Buffer.from(lines.join('\n') + '\n'),
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const answer = (await jsonCall(
      this.http,
      {
        method: 'POST',
        url: `${this.baseUrl}/files`,
        body,
        contentType: `multipart/form-data; boundary=${boundary}`,
        timeoutMs: uploadTimeoutMs(this.config.timeoutMs, body.length),
      },
      signal,
    )) as { id?: unknown };
    if (typeof answer?.id !== 'string' || answer.id.length === 0)
      throw new ProviderError('invalid_response', 'The batch API answered the upload without a file id');
    return { inputId: answer.id };
  }

  async createBatch(inputId: string, group: string, signal?: AbortSignal): Promise<UpstreamBatchRef> {
    throwIfAborted(signal);
    const body = Buffer.from(
      JSON.stringify({
        input_file_id: inputId,
        endpoint: ENDPOINT,
        completion_window: '24h',
        metadata: { [OPENAI_BATCH_GROUP_KEY]: group },
      }),
    );
    const batch = (await jsonCall(
      this.http,
      { method: 'POST', url: `${this.baseUrl}/batches`, body, contentType: 'application/json' },
      signal,
    )) as OpenAiBatchObject;
    if (typeof batch?.id !== 'string' || batch.id.length === 0)
      throw new ProviderError('invalid_response', 'The batch API answered the create without a batch id');
    return { batchId: batch.id, state: { inputFileId: inputId } };
  }

  /**
   * Lists batches newest first (GET /batches?limit=&after=) until one carries the group id in
   * its metadata, or the list reaches batches older than the window (findInList).
   */
  async findBatch(group: string, signal?: AbortSignal): Promise<UpstreamBatchRef | null> {
    const match = (batch: OpenAiBatchObject): UpstreamBatchRef | null =>
      batch?.metadata?.[OPENAI_BATCH_GROUP_KEY] === group && typeof batch.id === 'string'
        ? { batchId: batch.id, state: typeof batch.input_file_id === 'string' ? { inputFileId: batch.input_file_id } : {} }
        : null;
    return findInList(
      this.http,
      this.config,
      { url: `${this.baseUrl}/batches`, params: { size: 'limit', cursor: 'after' }, read: listPage, match },
      signal,
    );
  }

  async poll(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<UpstreamBatchStatus> {
    let batch: OpenAiBatchObject;
    try {
      batch = (await jsonCall(
        this.http,
        { method: 'GET', url: `${this.baseUrl}/batches/${encodeURIComponent(ref.batchId)}` },
        signal,
      )) as OpenAiBatchObject;
    } catch (err) {
      return pollTrouble(err);
    }
    const status = typeof batch?.status === 'string' ? batch.status : 'unknown';
    const outcome = ENDED[status];
    if (!outcome) {
      const counts = batch?.request_counts;
      return stillWaiting(
        status,
        [counts?.completed, counts?.failed].filter((n): n is number => typeof n === 'number'),
      );
    }
    const found: Record<string, string> = {};
    if (typeof batch.output_file_id === 'string' && batch.output_file_id) found.outputFileId = batch.output_file_id;
    if (typeof batch.error_file_id === 'string' && batch.error_file_id) found.errorFileId = batch.error_file_id;
    return { state: 'ended', upstreamStatus: status, outcome, found };
  }

  /**
   * The output file's lines, then the error file's, each as it arrives. Lines whose error says
   * the batch ended before they ran (batch_expired, batch_cancelled) are not answered: they are
   * the undelivered lines Kiln fails and refunds itself.
   */
  async *results(
    ref: UpstreamBatchRef,
    ended: Extract<UpstreamBatchStatus, { state: 'ended' }>,
    signal?: AbortSignal,
  ): AsyncIterable<UpstreamBatchResult> {
    for (const fileId of [ended.found.outputFileId, ended.found.errorFileId]) {
      if (!fileId) continue;
      const url = `${this.baseUrl}/files/${encodeURIComponent(fileId)}/content`;
      for await (const line of resultFileLines(this.http, url, this.config.maxImageBytes, this.maxLines, signal)) {
        const result = await resultOfLine<OpenAiBatchOutputLine>(line, 'custom_id', this.config.maxImageBytes, (parsed) =>
          this.lineResult(parsed, signal),
        );
        if (result) yield result;
      }
    }
  }

  async cancel(ref: UpstreamBatchRef, signal?: AbortSignal): Promise<void> {
    try {
      await jsonCall(this.http, { method: 'POST', url: `${this.baseUrl}/batches/${encodeURIComponent(ref.batchId)}/cancel` }, signal);
    } catch (err) {
      // A batch already over (completed, expired...) cannot be cancelled: nothing left to stop.
      if (err instanceof ProviderError && err.status === 409) return;
      throw err;
    }
  }

  private async lineResult(line: OpenAiBatchOutputLine, signal: AbortSignal | undefined): Promise<UpstreamBatchResult | null> {
    if (typeof line?.custom_id !== 'string') return null; // not one of Kiln's lines: nothing to match it to
    const key = line.custom_id;
    const response = line.response;
    const statusCode = typeof response?.status_code === 'number' ? response.status_code : null;
    if (statusCode === null) {
      const code = typeof line.error?.code === 'string' ? line.error.code : undefined;
      if (code && NEVER_RAN_CODES.includes(code)) return null;
      const message = typeof line.error?.message === 'string' ? line.error.message : 'no response';
      return {
        key,
        ok: false,
        error: classifyOpenAiError(
          { status: 500, headers: new Headers(), text: JSON.stringify({ error: { code, message } }) },
          { apiKey: this.config.apiKey },
        ),
      };
    }
    const bodyText = typeof response!.body === 'string' ? response!.body : JSON.stringify(response!.body ?? null);
    if (statusCode < 200 || statusCode >= 300) {
      return {
        key,
        ok: false,
        error: classifyOpenAiError({ status: statusCode, headers: new Headers(), text: bodyText }, { apiKey: this.config.apiKey }),
      };
    }
    try {
      const first = parseFirstImage(bodyText);
      const data =
        'b64' in first
          ? Buffer.from(first.b64, 'base64')
          : await downloadImage(first.url, { ...this.config, policy: this.downloadPolicy, signal });
      const image: RenderResult = await checkedImage(data, this.config.maxImageBytes);
      // The line's usage prices the image, as on a render (at the rule's economy factor).
      return { key, ok: true, image: first.usage ? { ...image, usage: first.usage } : image };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof ProviderError) return { key, ok: false, error: err };
      throw err;
    }
  }
}

/** A page of GET /batches: `has_more` and the last id are the next page's cursor; `created_at` is in seconds. */
function listPage(answer: unknown): BatchListPage<OpenAiBatchObject> {
  const list = answer as { data?: unknown; has_more?: unknown };
  const data = Array.isArray(list?.data) ? (list.data as OpenAiBatchObject[]) : [];
  const last = data[data.length - 1];
  return {
    items: data,
    next: list?.has_more === true && last && typeof last.id === 'string' ? last.id : null,
    lastCreatedMs: typeof last?.created_at === 'number' ? last.created_at * 1000 : NaN,
  };
}

function safeName(group: string): string {
  return group.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 100);
}
