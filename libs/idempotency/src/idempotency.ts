import { createHash } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { type BatchTier, deleteInRounds, queryRows } from '@app/database';
import { ErrorCode, KilnError } from '@app/errors';

/*
 * The idempotency_keys table: the api's creations take and remember keys, the generator's
 * maintenance sweeps them. A lib of its own so that the sweep does not load libs/batches into
 * the generator (libs/testing/src/architecture.ts checks the generator never loads it).
 */

/** How long a key is remembered from its first use; after that it counts as unused. */
export const IDEMPOTENCY_KEY_TTL_HOURS = 24;
const TTL = `interval '${IDEMPOTENCY_KEY_TTL_HOURS} hours'`;

/** The header's value: 1 to 255 printable ASCII characters (space to tilde). */
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/** A creation the client may retry: its key, and what it asked (route and body) as a hash. */
export interface IdempotentRequest {
  key: string;
  requestHash: string;
}

/** The 201 body a remembered creation answers again. */
export interface RememberedCreation {
  id: string;
  total: number;
  creditsCharged: number;
  status: string;
  /** Absent from answers remembered before the 201 carried it. */
  tier?: BatchTier;
}

/**
 * Reads the `Idempotency-Key` header of a creation: null without one, else the key with a
 * hash of the route and the body as parsed (object keys sorted at every depth, so key order
 * and whitespace do not make two requests differ). A malformed key is refused.
 */
export function idempotentRequest(header: string | string[] | undefined, route: string, body: unknown): IdempotentRequest | null {
  if (header === undefined) return null;
  if (typeof header !== 'string' || !KEY_PATTERN.test(header)) {
    throw new KilnError(ErrorCode.InvalidRequest, 'Idempotency-Key must be 1 to 255 printable ASCII characters', {
      field: 'Idempotency-Key',
      reason: typeof header === 'string' && header.length > 255 ? 'too_long' : 'malformed',
    });
  }
  return {
    key: header,
    requestHash: createHash('sha256')
      .update(`${route}\n${canonicalJson(body)}`)
      .digest('hex'),
  };
}

/** JSON with object keys sorted recursively: one text for every spelling of the same value. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The remembered answer when the key was used (and is still kept), or null. */
export async function findRememberedCreation(
  m: Pick<EntityManager, 'query'>,
  accountId: string,
  key: string,
): Promise<{ requestHash: string; response: RememberedCreation } | null> {
  const [row] = await queryRows<{ requestHash: string; response: RememberedCreation }>(
    m,
    `SELECT request_hash AS "requestHash", response FROM idempotency_keys
      WHERE account_id = $1 AND key = $2 AND created_at > now() - ${TTL}`,
    [accountId, key],
  );
  return row ?? null;
}

/**
 * The answer to a request whose key was already used: the remembered 201 when it asked the
 * same, else idempotency_key_reused.
 */
export function replayOf(
  remembered: { requestHash: string; response: RememberedCreation },
  request: IdempotentRequest,
): RememberedCreation {
  if (remembered.requestHash !== request.requestHash) {
    throw new KilnError(
      ErrorCode.IdempotencyKeyReused,
      'This Idempotency-Key was already used for a different request; use a new key for a new request',
      { key: request.key },
    );
  }
  return remembered.response;
}

/**
 * First statement of a creation's transaction: takes the key for this transaction, or refuses
 * with idempotency_key_in_use (409, Retry-After) when another request holds it, instead of
 * waiting behind it. The lock is PostgreSQL's, on a 64-bit hash of (account, key), released
 * at commit or rollback, so a crashed request never leaves the key taken. Returns what an
 * earlier request that committed meanwhile remembered (for a replay), else null; an expired
 * row is removed so the key is free again.
 */
export async function takeIdempotencyKey(
  m: EntityManager,
  accountId: string,
  key: string,
): Promise<{ requestHash: string; response: RememberedCreation } | null> {
  const [{ taken }] = await queryRows<{ taken: boolean }>(m, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS taken`, [
    `idempotency:${accountId}:${key}`,
  ]);
  if (!taken) {
    throw new KilnError(ErrorCode.IdempotencyKeyInUse, 'A request with this Idempotency-Key is still running; retry shortly', {
      key,
    });
  }
  await m.query(`DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND created_at <= now() - ${TTL}`, [accountId, key]);
  return findRememberedCreation(m, accountId, key);
}

/**
 * Remembers a creation in its own transaction. The primary key (account, key) is the backstop
 * that holds even without the lock: a second insert fails and rolls its whole creation back.
 */
export async function rememberCreation(
  m: EntityManager,
  accountId: string,
  request: IdempotentRequest,
  batchId: string,
  response: RememberedCreation,
): Promise<void> {
  await m.query(`INSERT INTO idempotency_keys (account_id, key, request_hash, response, batch_id) VALUES ($1, $2, $3, $4, $5)`, [
    accountId,
    request.key,
    request.requestHash,
    JSON.stringify(response),
    batchId,
  ]);
}

/** Forgets keys past their 24 hours, in bounded rounds; returns how many. */
export function sweepExpiredIdempotencyKeys(db: DataSource, batchSize = 1000): Promise<number> {
  return deleteInRounds(db, 'idempotency_keys', `created_at <= now() - ${TTL}`, [], batchSize);
}
