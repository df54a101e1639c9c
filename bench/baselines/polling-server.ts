/**
 * Baseline of the polling scenario: GET /v1/batches/:id with bare node:http and pg. Same
 * key check, same batch and task rows, same JSON shape as Kiln's BatchDetailResponseDto.
 * Run by the bench as a child process: DATABASE_URL in the environment; it reports its
 * port over IPC. FULL_ROWS=1 makes it read every column of both tables, as a TypeORM
 * `find()` does: a diagnostic of what over-fetching costs, not the baseline.
 */
import * as http from 'node:http';
import { authenticate, HttpError, listenAndReport, rawPool, sendError, sendJson } from './raw-common';

const db = rawPool(process.env.DATABASE_URL ?? '');
const ROUTE = /^\/v1\/batches\/([0-9a-f-]{36})$/i;
const FULL_ROWS = process.env.FULL_ROWS === '1';
const BATCH_COLUMNS = FULL_ROWS
  ? '*'
  : `id, created_at, prompts, model, aspect_ratio, resolution, quality, background, count_per_combo, ref_mode,
     ref_images, total, note, preview_url, created_via_api, status, credits_charged, credits_refunded, cancelled_at`;
const TASK_COLUMNS = FULL_ROWS ? '*' : 'id, batch_id, prompt, status, progress, result_url, error';

/** The batch columns read (BATCH_COLUMNS; FULL_ROWS reads more, unused), as node-postgres gives them: jsonb parsed, timestamps as Date. */
interface BatchRow {
  id: string;
  created_at: Date;
  prompts: string[];
  model: string;
  aspect_ratio: string;
  resolution: string;
  quality: string;
  background: string | null;
  count_per_combo: number;
  ref_mode: string;
  ref_images: string[];
  total: number;
  note: string | null;
  preview_url: string | null;
  created_via_api: boolean;
  status: string;
  credits_charged: number;
  credits_refunded: number;
  cancelled_at: Date | null;
}

interface TaskRow {
  id: string;
  batch_id: string;
  prompt: string;
  status: string;
  progress: number;
  result_url: string | null;
  error: string | null;
}

async function detail(req: http.IncomingMessage, res: http.ServerResponse, batchId: string): Promise<void> {
  const key = await authenticate(db, req, 'batches:read');
  const batches = await db.query<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM batches WHERE id = $1 AND account_id = $2`, [
    batchId,
    key.accountId,
  ]);
  const b = batches.rows[0];
  if (!b) throw new HttpError(404, 'not_found');
  const { rows: tasks } = await db.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE batch_id = $1 ORDER BY seq`, [batchId]);
  const counts = { pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 };
  for (const t of tasks) {
    if (t.status === 'pending' || t.status === 'queued') counts.pending++;
    else if (t.status === 'running') counts.running++;
    else if (t.status === 'succeeded') counts.succeeded++;
    else if (t.status === 'failed') counts.failed++;
    else if (t.status === 'cancelled') counts.cancelled++;
  }
  const done = counts.pending + counts.running === 0;
  sendJson(res, 200, {
    batch: {
      id: b.id,
      createdAt: b.created_at.getTime(),
      prompts: b.prompts,
      model: b.model,
      aspectRatio: b.aspect_ratio,
      resolution: b.resolution,
      quality: b.quality,
      background: b.background,
      countPerCombo: b.count_per_combo,
      refMode: b.ref_mode,
      refImages: b.ref_images,
      total: b.total,
      note: b.note,
      counts,
      previewUrl: b.preview_url,
      createdViaApi: b.created_via_api,
      status: status(b.status, counts, tasks.length),
      done,
      creditsCharged: b.credits_charged,
      creditsRefunded: b.credits_refunded,
      cancelledAt: b.cancelled_at ? b.cancelled_at.getTime() : null,
    },
    tasks: tasks.map((t) => ({
      id: t.id,
      batchId: t.batch_id,
      prompt: t.prompt,
      status: t.status,
      progress: t.progress,
      resultUrls: t.status === 'succeeded' && t.result_url ? [t.result_url] : [],
      error: t.error,
    })),
  });
}

/** The same derivation as libs/tasks batchStatusFromCounts. */
function status(
  stored: string,
  c: { pending: number; running: number; succeeded: number; failed: number; cancelled: number },
  total: number,
): string {
  if (total === 0) return stored;
  if (c.pending + c.running === 0) {
    if (c.cancelled > 0) return 'cancelled';
    return c.failed === 0 ? 'succeeded' : c.succeeded === 0 ? 'failed' : 'partial';
  }
  return c.pending === total ? 'pending' : 'running';
}

const server = http.createServer((req, res) => {
  const match = req.method === 'GET' ? ROUTE.exec(req.url ?? '') : null;
  if (!match) return sendJson(res, 404, { error: { code: 'not_found', message: 'not_found' } });
  detail(req, res, match[1]).catch((err) => sendError(res, err));
});
listenAndReport(server, 'polling-baseline');
