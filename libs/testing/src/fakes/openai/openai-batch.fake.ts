import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { askedSize, endsAt, FakeBatchUpstream, jsonLines, sendJson as send, shuffled } from '../fake-batch-upstream';
import type { CapturedRequest } from '../fake-upstream';

/** Prompt markers the fake obeys: a line whose prompt carries one ends that way. */
export const OPENAI_BATCH_FAKE_MARKERS = {
  /** The line is refused as OpenAI refuses content (400 moderation_blocked), in the error file. */
  refuse: '[fake:refuse]',
  /** The line fails with a 500 in the error file. */
  fail: '[fake:fail]',
  /** When the batch expires or is cancelled, lines carrying this never ran (batch_expired / batch_cancelled). */
  unfinished: '[fake:unfinished]',
} as const;

export interface FakeBatch {
  id: string;
  object: 'batch';
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: string;
  created_at: number;
  metadata: Record<string, string> | null;
  output_file_id?: string;
  error_file_id?: string;
  request_counts: { total: number; completed: number; failed: number };
  /** The fake's own: when it ends by itself (ms since epoch), null: only on command. */
  endsAt: number | null;
}

interface FakeFile {
  id: string;
  purpose: string;
  filename: string;
  content: Buffer;
}

interface InputLine {
  custom_id: string;
  method: string;
  url: string;
  body: { prompt?: string; size?: string; [k: string]: unknown };
}

export interface OpenAiBatchFakeOptions {
  /** A batch ends (completed) by itself this long after its create; null: only on command (`finish`). Default 0. */
  completeAfterMs?: number | null;
  /** Pixel size of the images written (real PNGs); default: the asked size divided by 8. */
  imageScale?: number;
}

/**
 * The OpenAI Batch API on 127.0.0.1 (baseUrl ends in /v1), for the openai batch client's tests
 * and the economy e2e tests: POST /files (multipart, purpose=batch), GET /files/{id}/content,
 * POST /batches, GET /batches/{id}, GET /batches?limit&after (newest first), POST
 * /batches/{id}/cancel. A batch ends by itself `completeAfterMs` after its create, or on
 * command (`finish(id, 'expired')`...). Its output and error files are written in a shuffled
 * order; each line succeeds with a real PNG unless its prompt carries a marker
 * (OPENAI_BATCH_FAKE_MARKERS). `submissions` counts how often each custom_id went into a
 * created batch; `holdOutputAfter` stops a result file mid-way until `release()`;
 * `answerNext('hang')` makes the next call hang (timeouts, crash tests).
 */
/** Steps `hangAt` may stop at; `created` makes the batch and never answers the create (the window a crash between create and record leaves). */
type Step = 'upload' | 'create' | 'created' | 'poll' | 'list' | 'cancel' | 'content';

export class OpenAiBatchFakeUpstream extends FakeBatchUpstream<Step> {
  readonly files = new Map<string, FakeFile>();
  readonly batches = new Map<string, FakeBatch>();
  private readonly cancelling = new Set<string>();
  private seq = 0;

  constructor(private readonly options: OpenAiBatchFakeOptions = {}) {
    super('/v1');
  }

  /** The lines of a batch's input, in order. */
  inputLines(batchId: string): InputLine[] {
    const batch = this.batches.get(batchId);
    const file = batch && this.files.get(batch.input_file_id);
    return file ? jsonLines<InputLine>(file.content) : [];
  }

  /**
   * Ends a batch now: `completed` runs every line; `expired`, `cancelled` and `failed` run the
   * lines without the unfinished marker and leave the others unrun (in the error file as
   * batch_expired / batch_cancelled, as OpenAI writes them; nothing for failed).
   */
  async finish(batchId: string, status: 'completed' | 'expired' | 'cancelled' | 'failed'): Promise<void> {
    const batch = this.batches.get(batchId);
    if (!batch) throw new Error(`no batch ${batchId}`);
    const lines = this.inputLines(batchId);
    const output: string[] = [];
    const errors: string[] = [];
    let completed = 0;
    let failed = 0;
    for (const line of lines) {
      const prompt = String(line.body.prompt ?? '');
      const id = `batch_req_${randomBytes(8).toString('hex')}`;
      if (status !== 'completed' && prompt.includes(OPENAI_BATCH_FAKE_MARKERS.unfinished)) {
        if (status === 'failed') continue;
        const code = status === 'expired' ? 'batch_expired' : 'batch_cancelled';
        errors.push(
          JSON.stringify({
            id,
            custom_id: line.custom_id,
            response: null,
            error: { code, message: `This line was not executed because the batch ${status === 'expired' ? 'expired' : 'was cancelled'}.` },
          }),
        );
        continue;
      }
      if (prompt.includes(OPENAI_BATCH_FAKE_MARKERS.refuse)) {
        failed++;
        const body = {
          error: {
            type: 'image_generation_user_error',
            code: 'moderation_blocked',
            message: 'Your request was rejected by the safety system.',
          },
        };
        errors.push(JSON.stringify({ id, custom_id: line.custom_id, response: { status_code: 400, request_id: id, body }, error: null }));
      } else if (prompt.includes(OPENAI_BATCH_FAKE_MARKERS.fail)) {
        failed++;
        errors.push(
          JSON.stringify({
            id,
            custom_id: line.custom_id,
            response: { status_code: 500, request_id: id, body: { error: { message: 'The server had an error', type: 'server_error' } } },
            error: null,
          }),
        );
      } else {
        completed++;
        const png = await this.png(askedSize(line.body.size), this.options.imageScale ?? 8);
        // usage as a GPT image answer reports it (1056 output image tokens: 1024x1024 at medium).
        const usage = {
          input_tokens: 20,
          output_tokens: 1056,
          total_tokens: 1076,
          input_tokens_details: { text_tokens: 20, image_tokens: 0 },
        };
        const body = { created: Math.floor(Date.now() / 1000), data: [{ b64_json: png.toString('base64') }], usage };
        output.push(JSON.stringify({ id, custom_id: line.custom_id, response: { status_code: 200, request_id: id, body }, error: null }));
      }
    }
    if (output.length) batch.output_file_id = this.addFile('batch_output', `${batchId}_output.jsonl`, shuffled(output)).id;
    if (errors.length) batch.error_file_id = this.addFile('batch_output', `${batchId}_error.jsonl`, shuffled(errors)).id;
    batch.request_counts = { total: lines.length, completed, failed };
    batch.status = status;
    batch.endsAt = null;
  }

  private addFile(purpose: string, filename: string, lines: string[]): FakeFile {
    const file: FakeFile = {
      id: `file-${randomBytes(12).toString('hex')}`,
      purpose,
      filename,
      content: Buffer.from(lines.map((l) => `${l}\n`).join('')),
    };
    this.files.set(file.id, file);
    return file;
  }

  protected stepOf(req: CapturedRequest): Step | null {
    const p = new URL(req.path, 'http://fake').pathname;
    if (req.method === 'POST' && p === '/v1/files') return 'upload';
    if (req.method === 'POST' && p === '/v1/batches') return 'create';
    if (req.method === 'GET' && p === '/v1/batches') return 'list';
    if (p.endsWith('/cancel')) return 'cancel';
    if (p.endsWith('/content')) return 'content';
    if (req.method === 'GET' && p.startsWith('/v1/batches/')) return 'poll';
    return null;
  }

  protected async route(req: CapturedRequest, res: ServerResponse): Promise<void> {
    const url = new URL(req.path, 'http://fake');
    const p = url.pathname;
    let m: RegExpExecArray | null;
    if (req.method === 'POST' && p === '/v1/files') return this.upload(req, res);
    if (req.method === 'GET' && (m = /^\/v1\/files\/([^/]+)\/content$/.exec(p))) return this.content(decodeURIComponent(m[1]), res);
    if (req.method === 'POST' && p === '/v1/batches') return this.create(req, res);
    if (req.method === 'GET' && p === '/v1/batches') return this.list(url, res);
    if (req.method === 'GET' && (m = /^\/v1\/batches\/([^/]+)$/.exec(p))) {
      const batch = await this.current(decodeURIComponent(m[1]));
      return batch ? send(res, 200, view(batch)) : notFound(res);
    }
    if (req.method === 'POST' && (m = /^\/v1\/batches\/([^/]+)\/cancel$/.exec(p))) {
      const batch = await this.current(decodeURIComponent(m[1]));
      if (!batch) return notFound(res);
      if (!['validating', 'in_progress', 'finalizing'].includes(batch.status)) {
        return send(res, 409, { error: { message: `Cannot cancel a batch with status ${batch.status}.`, type: 'invalid_request_error' } });
      }
      await this.finish(batch.id, 'cancelled');
      batch.status = 'cancelling'; // one retrieve sees it cancelling, the next one cancelled
      batch.endsAt = Date.now();
      this.cancelling.add(batch.id);
      return send(res, 200, view(batch));
    }
    return notFound(res);
  }

  private async upload(req: CapturedRequest, res: ServerResponse): Promise<void> {
    const form = await new Response(new Uint8Array(req.body), { headers: { 'content-type': String(req.headers['content-type'] ?? '') } })
      .formData()
      .catch(() => null);
    const file = form?.get('file');
    if (!form || form.get('purpose') !== 'batch' || !file || typeof file === 'string') {
      return send(res, 400, { error: { message: 'file and purpose=batch are required', type: 'invalid_request_error' } });
    }
    const content = Buffer.from(await file.arrayBuffer());
    const lines = content
      .toString('utf8')
      .split('\n')
      .filter((l) => l.trim().length > 0);
    if (lines.length > 50_000 || content.length > 200 * 1024 * 1024)
      return send(res, 400, { error: { message: 'too many lines or bytes', type: 'invalid_request_error' } });
    const stored: FakeFile = { id: `file-${randomBytes(12).toString('hex')}`, purpose: 'batch', filename: file.name, content };
    this.files.set(stored.id, stored);
    send(res, 200, {
      id: stored.id,
      object: 'file',
      bytes: content.length,
      created_at: Math.floor(Date.now() / 1000),
      filename: file.name,
      purpose: 'batch',
      status: 'processed',
    });
  }

  private async create(req: CapturedRequest, res: ServerResponse): Promise<void> {
    const body = JSON.parse(req.body.toString('utf8')) as {
      input_file_id?: string;
      endpoint?: string;
      completion_window?: string;
      metadata?: Record<string, string>;
    };
    const input = body.input_file_id ? this.files.get(body.input_file_id) : undefined;
    if (!input) return send(res, 400, { error: { message: `No such file: ${body.input_file_id}`, type: 'invalid_request_error' } });
    if (body.completion_window !== '24h' || !body.endpoint)
      return send(res, 400, { error: { message: 'bad batch parameters', type: 'invalid_request_error' } });
    const lines = jsonLines<InputLine>(input.content);
    if (lines.some((l) => l.url !== body.endpoint))
      return send(res, 400, { error: { message: 'every line must use the batch endpoint', type: 'invalid_request_error' } });
    // created_at in seconds, as OpenAI's; the sequence keeps same-second batches in order.
    const batch: FakeBatch = {
      id: `batch_${String(++this.seq).padStart(6, '0')}${randomBytes(6).toString('hex')}`,
      object: 'batch',
      endpoint: body.endpoint,
      input_file_id: input.id,
      completion_window: '24h',
      status: 'validating',
      created_at: Math.floor(Date.now() / 1000),
      metadata: body.metadata ?? null,
      request_counts: { total: lines.length, completed: 0, failed: 0 },
      endsAt: endsAt(this.options.completeAfterMs),
    };
    this.batches.set(batch.id, batch);
    this.created(
      res,
      lines.map((l) => l.custom_id),
      view(batch),
    );
  }

  private list(url: URL, res: ServerResponse): void {
    const limit = Math.min(100, Math.max(1, Number(url.searchParams.get('limit') ?? 20)));
    const after = url.searchParams.get('after');
    const all = [...this.batches.values()].reverse(); // newest first
    const from = after ? all.findIndex((b) => b.id === after) + 1 : 0;
    const data = all.slice(from, from + limit);
    send(res, 200, {
      object: 'list',
      data: data.map(view),
      first_id: data[0]?.id ?? null,
      last_id: data[data.length - 1]?.id ?? null,
      has_more: from + limit < all.length,
    });
  }

  /** The batch as of now: validating -> in_progress on the first look; ended by itself at endsAt. */
  private async current(id: string): Promise<FakeBatch | undefined> {
    const batch = this.batches.get(id);
    if (!batch) return undefined;
    if (batch.status === 'cancelling') {
      if (!this.cancelling.delete(id)) {
        batch.status = 'cancelled';
        batch.endsAt = null;
      }
    } else if (batch.status === 'validating') batch.status = 'in_progress';
    if (batch.status === 'in_progress' && batch.endsAt !== null && Date.now() >= batch.endsAt) await this.finish(id, 'completed');
    return batch;
  }

  private async content(id: string, res: ServerResponse): Promise<void> {
    const file = this.files.get(id);
    if (!file) return notFound(res);
    await this.streamFile(file.content, res);
  }
}

function view(batch: FakeBatch): Omit<FakeBatch, 'endsAt'> {
  const { endsAt: _endsAt, ...rest } = batch;
  return rest;
}

function notFound(res: ServerResponse): void {
  send(res, 404, { error: { message: 'Not found', type: 'invalid_request_error' } });
}
