import { createHash } from 'node:crypto';
import * as http from 'node:http';
import { Pool } from 'pg';

/**
 * What the bare baselines share: Kiln's key check done by hand (one indexed query on the
 * SHA-256 of the bearer token, as libs/keys does) and the node:http plumbing. No framework,
 * no ORM, no logging: the floor Kiln's own stack is measured against.
 */

const KEY_PATTERN = /^kiln_live_[0-9A-Za-z]{32}$/;

export interface RawKey {
  keyId: string;
  accountId: string;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(code);
  }
}

/** What the key check's statement returns, as node-postgres gives it (timestamps as Date). */
interface KeyCheckRow {
  id: string;
  account_id: string;
  scopes: string[];
  revoked_at: Date | null;
  expires_at: Date | null;
  status: string;
  api_access: boolean;
}

export async function authenticate(db: Pool, req: http.IncomingMessage, scope: string, prepared = false): Promise<RawKey> {
  const header = req.headers.authorization ?? '';
  const token = header.startsWith('Bearer ') ? header.slice(7) : '';
  if (!KEY_PATTERN.test(token)) throw new HttpError(401, 'invalid_api_key');
  const hash = createHash('sha256').update(token).digest('hex');
  const text = `SELECT k.id, k.account_id, k.scopes, k.revoked_at, k.expires_at, a.status, p.api_access
       FROM api_keys k JOIN accounts a ON a.id = k.account_id JOIN plans p ON p.key = a.plan_key
      WHERE k.key_hash = $1`;
  // prepared: a named statement, parsed and planned once per connection (as Kiln's own is).
  const { rows } = await db.query<KeyCheckRow>(
    prepared ? { name: 'baseline_authenticate', text, values: [hash] } : { text, values: [hash] },
  );
  const row = rows[0];
  if (!row) throw new HttpError(401, 'invalid_api_key');
  if (row.revoked_at) throw new HttpError(401, 'key_revoked');
  if (row.expires_at && row.expires_at.getTime() <= Date.now()) throw new HttpError(401, 'invalid_api_key');
  if (row.status !== 'active') throw new HttpError(403, 'account_disabled');
  if (!row.api_access) throw new HttpError(403, 'api_not_available_on_plan');
  if (!row.scopes.includes(scope)) throw new HttpError(403, 'insufficient_scope');
  return { keyId: row.id, accountId: row.account_id };
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload) });
  res.end(payload);
}

export function sendError(res: http.ServerResponse, err: unknown): void {
  if (err instanceof HttpError) return sendJson(res, err.status, { error: { code: err.code, message: err.code } });
  sendJson(res, 500, { error: { code: 'internal_error', message: err instanceof Error ? err.message : String(err) } });
}

export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** Listens on a free port and tells the bench (IPC) which one. */
export function listenAndReport(server: http.Server, name: string): void {
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    process.send?.({ type: 'listening', name, port });
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

/** The same pool size as Kiln's TypeORM data source (libs/database: extra.max = 20). */
export function rawPool(url: string): Pool {
  return new Pool({ connectionString: url, max: 20 });
}
