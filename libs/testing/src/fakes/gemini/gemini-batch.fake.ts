import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { endsAt, FakeBatchUpstream, jsonLines, sendJson as send, shuffled } from '../fake-batch-upstream';
import type { CapturedRequest } from '../fake-upstream';

/** Prompt markers the fake obeys: a line whose prompt carries one ends that way. */
export const GEMINI_BATCH_FAKE_MARKERS = {
  /** The prompt is blocked (promptFeedback.blockReason PROHIBITED_CONTENT), as Gemini refuses content. */
  refuse: '[fake:refuse]',
  /** The line fails with an INTERNAL status. */
  fail: '[fake:fail]',
  /** When the batch expires or is cancelled, lines carrying this never ran (absent from the responses file). */
  unfinished: '[fake:unfinished]',
} as const;

export interface FakeGeminiBatch {
  id: string;
  model: string;
  displayName: string;
  inputFile: string;
  state: string;
  createTime: string;
  responsesFile?: string;
  stats: { requestCount: number; successfulRequestCount: number; failedRequestCount: number };
  endsAt: number | null;
}

interface InputLine {
  key: string;
  request: { contents?: { parts?: { text?: string }[] }[]; generationConfig?: { imageConfig?: { aspectRatio?: string } } };
}

export interface GeminiBatchFakeOptions {
  /** A batch succeeds by itself this long after its create; null: only on command (`finish`). Default 0. */
  completeAfterMs?: number | null;
}

const SIZE_1K: Record<string, [number, number]> = {
  '1:1': [1024, 1024],
  '16:9': [1344, 768],
  '9:16': [768, 1344],
  '3:2': [1248, 832],
  '2:3': [832, 1248],
};

/** Steps `hangAt` may stop at; `created` makes the batch and never answers the create. */
type Step = 'upload-start' | 'upload' | 'create' | 'created' | 'poll' | 'list' | 'cancel' | 'download';

/**
 * Gemini's batch API on 127.0.0.1 (baseUrl ends in /v1beta): the Files API's resumable upload
 * (`POST /upload/v1beta/files` start, then the bytes to the upload URL it answers, `upload` /
 * `upload, finalize`), `POST /v1beta/models/{model}:batchGenerateContent` with a file input,
 * `GET /v1beta/batches/{id}` and `GET /v1beta/batches?pageSize&pageToken` answering
 * long-running operations whose metadata is the batch, `POST /v1beta/batches/{id}:cancel`, and
 * `GET /v1beta/files/{id}:download?alt=media` streaming the responses file (`{key, response}`
 * or `{key, error}` lines, shuffled). The upload URL it answers names another host on purpose:
 * a client must use it on its own origin, as the SDK does.
 */
export class GeminiBatchFakeUpstream extends FakeBatchUpstream<Step> {
  readonly files = new Map<string, Buffer>();
  readonly batches = new Map<string, FakeGeminiBatch>();
  private readonly uploads = new Map<string, Buffer[]>();
  private seq = 0;

  constructor(private readonly options: GeminiBatchFakeOptions = {}) {
    super('/v1beta');
  }

  inputLines(batchId: string): InputLine[] {
    const batch = this.batches.get(batchId);
    const content = batch && this.files.get(batch.inputFile);
    return content ? jsonLines<InputLine>(content) : [];
  }

  /** Ends a batch now, as OpenAiBatchFakeUpstream.finish does; unrun lines are left out of the responses file. */
  async finish(
    batchId: string,
    state: 'BATCH_STATE_SUCCEEDED' | 'BATCH_STATE_EXPIRED' | 'BATCH_STATE_CANCELLED' | 'BATCH_STATE_FAILED',
  ): Promise<void> {
    const batch = this.batches.get(batchId);
    if (!batch) throw new Error(`no batch ${batchId}`);
    const out: string[] = [];
    let ok = 0;
    let failed = 0;
    for (const line of this.inputLines(batchId)) {
      const prompt = line.request.contents?.[0]?.parts?.map((p) => p.text ?? '').join(' ') ?? '';
      if (state !== 'BATCH_STATE_SUCCEEDED' && prompt.includes(GEMINI_BATCH_FAKE_MARKERS.unfinished)) continue;
      if (prompt.includes(GEMINI_BATCH_FAKE_MARKERS.refuse)) {
        failed++;
        out.push(JSON.stringify({ key: line.key, response: { promptFeedback: { blockReason: 'PROHIBITED_CONTENT' } } }));
      } else if (prompt.includes(GEMINI_BATCH_FAKE_MARKERS.fail)) {
        failed++;
        out.push(JSON.stringify({ key: line.key, error: { code: 13, message: 'Internal error encountered.', status: 'INTERNAL' } }));
      } else {
        ok++;
        const [w, h] = SIZE_1K[line.request.generationConfig?.imageConfig?.aspectRatio ?? '1:1'] ?? SIZE_1K['1:1'];
        const png = await this.png({ width: w, height: h }, 8);
        const response = {
          candidates: [
            {
              content: { role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: png.toString('base64') } }] },
              finishReason: 'STOP',
            },
          ],
          modelVersion: batch.model,
        };
        out.push(JSON.stringify({ key: line.key, response }));
      }
    }
    if (state !== 'BATCH_STATE_FAILED' && out.length > 0) {
      const name = `files/batch-${randomBytes(8).toString('hex')}`;
      this.files.set(
        name,
        Buffer.from(
          shuffled(out)
            .map((l) => `${l}\n`)
            .join(''),
        ),
      );
      batch.responsesFile = name;
    }
    batch.stats = { requestCount: batch.stats.requestCount, successfulRequestCount: ok, failedRequestCount: failed };
    batch.state = state;
    batch.endsAt = null;
  }

  protected stepOf(req: CapturedRequest): Step | null {
    const url = new URL(req.path, 'http://fake');
    const p = url.pathname;
    if (p === '/upload/v1beta/files') return url.searchParams.has('upload_id') ? 'upload' : 'upload-start';
    if (p.endsWith(':batchGenerateContent')) return 'create';
    if (p === '/v1beta/batches') return 'list';
    if (p.endsWith(':cancel')) return 'cancel';
    if (p.endsWith(':download')) return 'download';
    if (p.startsWith('/v1beta/batches/')) return 'poll';
    return null;
  }

  protected async route(req: CapturedRequest, res: ServerResponse): Promise<void> {
    const url = new URL(req.path, 'http://fake');
    const p = url.pathname;
    let m: RegExpExecArray | null;
    if (req.headers['x-goog-api-key'] === undefined)
      return send(res, 403, { error: { code: 403, message: "Method doesn't allow unregistered callers", status: 'PERMISSION_DENIED' } });
    if (req.method === 'POST' && p === '/upload/v1beta/files') return this.upload(req, url, res);
    if (req.method === 'POST' && (m = /^\/v1beta\/models\/([^/:]+):batchGenerateContent$/.exec(p)))
      return this.create(decodeURIComponent(m[1]), req, res);
    if (req.method === 'GET' && p === '/v1beta/batches') return this.list(url, res);
    if (req.method === 'POST' && (m = /^\/v1beta\/batches\/([^/:]+):cancel$/.exec(p))) {
      const batch = await this.current(`batches/${decodeURIComponent(m[1])}`);
      if (!batch) return notFound(res);
      if (batch.state !== 'BATCH_STATE_PENDING' && batch.state !== 'BATCH_STATE_RUNNING') {
        return send(res, 400, { error: { code: 400, message: 'The batch is already over.', status: 'FAILED_PRECONDITION' } });
      }
      await this.finish(batch.id, 'BATCH_STATE_CANCELLED');
      return send(res, 200, {});
    }
    if (req.method === 'GET' && (m = /^\/v1beta\/batches\/([^/:]+)$/.exec(p))) {
      const batch = await this.current(`batches/${decodeURIComponent(m[1])}`);
      return batch ? send(res, 200, operation(batch)) : notFound(res);
    }
    if (req.method === 'GET' && (m = /^\/v1beta\/files\/([^/:]+):download$/.exec(p)) && url.searchParams.get('alt') === 'media') {
      const content = this.files.get(`files/${decodeURIComponent(m[1])}`);
      return content ? this.streamFile(content, res) : notFound(res);
    }
    return notFound(res);
  }

  private upload(req: CapturedRequest, url: URL, res: ServerResponse): void {
    const id = url.searchParams.get('upload_id');
    if (id === null) {
      if (req.headers['x-goog-upload-protocol'] !== 'resumable' || req.headers['x-goog-upload-command'] !== 'start') {
        return send(res, 400, { error: { code: 400, message: 'resumable start expected', status: 'INVALID_ARGUMENT' } });
      }
      const uploadId = randomBytes(8).toString('hex');
      this.uploads.set(uploadId, []);
      // Another host on purpose: the client must send the bytes to its own origin.
      return send(
        res,
        200,
        {},
        {
          'x-goog-upload-url': `https://upload.fake.invalid/upload/v1beta/files?upload_id=${uploadId}&upload_protocol=resumable`,
          'x-goog-upload-status': 'active',
        },
      );
    }
    const parts = this.uploads.get(id);
    if (!parts) return notFound(res);
    const offset = Number(req.headers['x-goog-upload-offset']);
    const have = parts.reduce((n, b) => n + b.length, 0);
    if (offset !== have)
      return send(res, 400, { error: { code: 400, message: `offset ${offset}, expected ${have}`, status: 'INVALID_ARGUMENT' } });
    parts.push(req.body);
    const command = String(req.headers['x-goog-upload-command'] ?? '');
    if (command === 'upload') return send(res, 200, {}, { 'x-goog-upload-status': 'active' });
    if (command !== 'upload, finalize') return send(res, 400, { error: { code: 400, message: 'bad command', status: 'INVALID_ARGUMENT' } });
    const name = `files/${randomBytes(8).toString('hex')}`;
    const content = Buffer.concat(parts);
    this.files.set(name, content);
    this.uploads.delete(id);
    send(
      res,
      200,
      { file: { name, mimeType: 'application/jsonl', sizeBytes: String(content.length), state: 'ACTIVE' } },
      { 'x-goog-upload-status': 'final' },
    );
  }

  private create(model: string, req: CapturedRequest, res: ServerResponse): void {
    const body = JSON.parse(req.body.toString('utf8')) as { batch?: { displayName?: string; inputConfig?: { fileName?: string } } };
    const inputFile = body.batch?.inputConfig?.fileName;
    const content = inputFile ? this.files.get(inputFile) : undefined;
    if (!content) return send(res, 400, { error: { code: 400, message: `No file ${inputFile}`, status: 'INVALID_ARGUMENT' } });
    const lines = jsonLines<InputLine>(content);
    const batch: FakeGeminiBatch = {
      id: `batches/${String(++this.seq).padStart(6, '0')}${randomBytes(6).toString('hex')}`,
      model: `models/${model}`,
      displayName: body.batch?.displayName ?? '',
      inputFile: inputFile!,
      state: 'BATCH_STATE_PENDING',
      createTime: new Date().toISOString(),
      stats: { requestCount: lines.length, successfulRequestCount: 0, failedRequestCount: 0 },
      endsAt: endsAt(this.options.completeAfterMs),
    };
    this.batches.set(batch.id, batch);
    this.created(
      res,
      lines.map((l) => l.key),
      operation(batch),
    );
  }

  private list(url: URL, res: ServerResponse): void {
    const size = Math.min(100, Math.max(1, Number(url.searchParams.get('pageSize') ?? 50)));
    const from = Number(url.searchParams.get('pageToken') ?? 0) || 0;
    const all = [...this.batches.values()].reverse();
    const page = all.slice(from, from + size);
    send(res, 200, { operations: page.map(operation), ...(from + size < all.length ? { nextPageToken: String(from + size) } : {}) });
  }

  private async current(id: string): Promise<FakeGeminiBatch | undefined> {
    const batch = this.batches.get(id);
    if (!batch) return undefined;
    if (batch.state === 'BATCH_STATE_PENDING') batch.state = 'BATCH_STATE_RUNNING';
    else if (batch.state === 'BATCH_STATE_RUNNING' && batch.endsAt !== null && Date.now() >= batch.endsAt)
      await this.finish(id, 'BATCH_STATE_SUCCEEDED');
    return batch;
  }
}

/** A batch as the API answers it: an operation whose metadata is the GenerateContentBatch. */
function operation(batch: FakeGeminiBatch): unknown {
  const over = !['BATCH_STATE_PENDING', 'BATCH_STATE_RUNNING'].includes(batch.state);
  return {
    name: batch.id,
    metadata: {
      '@type': 'type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch',
      model: batch.model,
      displayName: batch.displayName,
      inputConfig: { fileName: batch.inputFile },
      createTime: batch.createTime,
      updateTime: new Date().toISOString(),
      batchStats: {
        requestCount: String(batch.stats.requestCount),
        successfulRequestCount: String(batch.stats.successfulRequestCount),
        failedRequestCount: String(batch.stats.failedRequestCount),
      },
      state: batch.state,
      name: batch.id,
      ...(batch.responsesFile ? { output: { responsesFile: batch.responsesFile } } : {}),
    },
    ...(over ? { done: true } : {}),
  };
}

function notFound(res: ServerResponse): void {
  send(res, 404, { error: { code: 404, message: 'Requested entity was not found.', status: 'NOT_FOUND' } });
}
