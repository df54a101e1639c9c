import type { Pool, PoolClient } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/**
 * Rows of a raw query. TypeORM's postgres driver returns `[rows, affected]` when the
 * statement's command is UPDATE or DELETE (even with RETURNING, and even after a WITH) but
 * plain rows for SELECT and INSERT; this hides the difference. Rows are objects, never
 * arrays, so the pair cannot be mistaken for two rows.
 */
export async function queryRows<T = Record<string, unknown>>(
  m: Pick<EntityManager, 'query'>,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const result: unknown = await m.query(sql, params);
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number') {
    return result[0] as T[];
  }
  return result as T[];
}

/**
 * Deletes the rows of `table` that match `where` in rounds of `batchSize`, each its own short
 * statement, so a sweep of any size never holds a long transaction or runs into the
 * statement timeout; returns how many went. `where` is trusted SQL over the table's columns
 * (qualify them with the table's name inside subqueries): $1 is the round size, $2... are
 * `params`. Safe to run on several replicas at once.
 */
export async function deleteInRounds(
  db: Pick<EntityManager, 'query'>,
  table: string,
  where: string,
  params: unknown[],
  batchSize: number,
): Promise<number> {
  let removed = 0;
  for (;;) {
    const rows = await queryRows(db, `DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE ${where} LIMIT $1) RETURNING 1`, [
      batchSize,
      ...params,
    ]);
    removed += rows.length;
    if (rows.length < batchSize) return removed;
  }
}

/** A constant statement some route runs on every request, named so it can be prepared once per connection. */
export interface PreparedStatement {
  /** Unique in the process: node-postgres keys each connection's prepared statements by it. */
  name: string;
  text: string;
}

/**
 * Rows of a named prepared statement: PostgreSQL parses and plans it once per pooled
 * connection instead of at every call, and each call sends three protocol messages instead
 * of five. For the statements of the hottest paths (authenticating a key, a poll's reads,
 * the generator's grouped task writes, the webhook outbox and sender). With a transaction's
 * EntityManager it runs on that transaction's connection. Straight to the pool TypeORM holds: TypeORM's query() cannot name a
 * statement. Its columns are listed, never `*`, so a migration that adds a column does not
 * change a prepared statement's result type.
 */
export async function queryPrepared<T extends object = Record<string, unknown>>(
  db: DataSource | EntityManager,
  statement: PreparedStatement,
  values: unknown[],
): Promise<T[]> {
  const source = 'driver' in db ? db : db.connection;
  const config = UNNAMED.has(source) ? { text: statement.text, values } : { name: statement.name, text: statement.text, values };
  // Inside a transaction: on the transaction's own connection.
  const runner = 'queryRunner' in db ? db.queryRunner : undefined;
  if (runner && !runner.isReleased) {
    const client = (await runner.connect()) as PoolClient;
    return (await client.query<T>(config)).rows;
  }
  const pool = (source.driver as PostgresDriver).master as Pool;
  return (await pool.query<T>(config)).rows;
}

/** Data sources whose queryPrepared statements run unnamed. */
const UNNAMED = new WeakSet<DataSource>();

/**
 * Makes queryPrepared run `source`'s statements unnamed, parsed and planned at every call
 * (DATABASE_PREPARED_STATEMENTS=false). Behind a transaction-mode pooler a client's next
 * statement may land on another server connection, where a statement prepared on the first
 * does not exist, or one of the same name prepared by another client does ("prepared
 * statement ... already exists").
 */
export function runStatementsUnnamed(source: DataSource): void {
  UNNAMED.add(source);
}

/** The largest value of a PostgreSQL integer (int4) column: request fields stored in one are bounded by it. */
export const INT4_MAX = 2_147_483_647;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a canonical UUID: anything else would make PostgreSQL's uuid cast fail with a 500. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** A PostgreSQL error's code and constraint, whether TypeORM wrapped it (QueryFailedError) or not. */
export function pgError(err: unknown): { code?: string; constraint?: string } {
  const e = err as { code?: string; constraint?: string; driverError?: { code?: string; constraint?: string } };
  return { code: e?.code ?? e?.driverError?.code, constraint: e?.constraint ?? e?.driverError?.constraint };
}

/**
 * Codes of a database that cannot be reached, is going away or is too slow: the socket errors
 * of a refused, reset or unroutable connection, and PostgreSQL's own (class 08 connection
 * exceptions; 57P01-57P03 shutdown, crash, starting up; 53300 too many connections; 57014 a
 * statement cancelled, by DATABASE_QUERY_TIMEOUT_MS).
 */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '57014',
]);
/** node-postgres and pg-pool say these in messages only, without a code ("Query read timeout": the client's query_timeout). */
const UNAVAILABLE_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout/i;

/** True when `err` says PostgreSQL is unreachable (worth a 503 and a retry), not that a query was wrong. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const { code } = pgError(err);
  if (code && (UNAVAILABLE_CODES.has(code) || /^08/.test(code))) return true;
  const message = err instanceof Error ? err.message : '';
  return UNAVAILABLE_MESSAGE.test(message);
}

/**
 * PostgreSQL's answers to two transactions getting in each other's way: a deadlock (40P01,
 * one of them chosen to fail), a serialization failure (40001) and a lock not had in time
 * (55P03). The failed transaction rolled back whole, so the same request asked again is
 * sound: worth a 503 and a short Retry-After, not a 500 that reads as a bug in the request.
 */
const CONFLICT_CODES = new Set(['40P01', '40001', '55P03']);

/** True when `err` is a transaction that lost to a concurrent one (see CONFLICT_CODES). */
export function isTransientConflict(err: unknown): boolean {
  const { code } = pgError(err);
  return code !== undefined && CONFLICT_CODES.has(code);
}
