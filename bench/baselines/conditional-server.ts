/**
 * Baseline of the conditional polling scenario: GET /v1/batches/:id with If-None-Match, with
 * bare node:http and pg. The same key check as Kiln's and one read of the batch's version;
 * 304 when the client's ETag is current (the only case the scenario measures). Run by the
 * bench as a child process: DATABASE_URL in the environment; it reports its port over IPC.
 * PREPARED=1 names both statements (prepared once per connection), as Kiln does: a diagnostic.
 */
import * as http from 'node:http';
import { authenticate, HttpError, listenAndReport, rawPool, sendError, sendJson } from './raw-common';

const db = rawPool(process.env.DATABASE_URL ?? '');
const PREPARED = process.env.PREPARED === '1';
const VERSION_SQL = `SELECT version FROM batches WHERE id = $1 AND account_id = $2`;
const ROUTE = /^\/v1\/batches\/([0-9a-f-]{36})$/i;

/** VERSION_SQL's row: a bigint, which node-postgres gives as a string. */
interface VersionRow {
  version: string;
}

async function conditional(req: http.IncomingMessage, res: http.ServerResponse, batchId: string): Promise<void> {
  const key = await authenticate(db, req, 'batches:read', PREPARED);
  const values = [batchId, key.accountId];
  const { rows } = await db.query<VersionRow>(
    PREPARED ? { name: 'baseline_version', text: VERSION_SQL, values } : { text: VERSION_SQL, values },
  );
  if (!rows[0]) throw new HttpError(404, 'not_found');
  const etag = `W/"${batchId}-${rows[0].version}"`;
  if (req.headers['if-none-match'] === etag) {
    res.writeHead(304, { etag });
    res.end();
    return;
  }
  sendJson(res, 200, { etag });
}

const server = http.createServer((req, res) => {
  const match = req.method === 'GET' ? ROUTE.exec(req.url ?? '') : null;
  if (!match) return sendJson(res, 404, { error: { code: 'not_found', message: 'not_found' } });
  conditional(req, res, match[1]).catch((err) => sendError(res, err));
});
listenAndReport(server, 'conditional-baseline');
