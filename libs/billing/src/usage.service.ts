import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { CHARGE_KIND, REFUND_KINDS_SQL, USAGE_KINDS_SQL, utcDay } from './billing.service';
import { LedgerKind, queryRows, queryText } from '@app/database';
import { invalidRequest } from '@app/errors';
import { decodeLedgerCursor, encodeLedgerCursor } from './ledger-cursor';

export interface UsageDay {
  /** UTC day the ledger rows were written, YYYY-MM-DD. */
  day: string;
  /** null: batches created from the dashboard, which have no key. */
  keyId: string | null;
  charged: number;
  refunded: number;
}

/** Images of the batches created on one UTC day (the dashboard's chart). */
export interface ImagesDay {
  day: string;
  /** Tasks of those batches: what was ordered. */
  ordered: number;
  /** Those that succeeded so far. */
  succeeded: number;
}

/** The batches created in the window by one key (null: the dashboard) on one model. */
export interface UsageBreakdown {
  keyId: string | null;
  model: string;
  batches: number;
  ordered: number;
  succeeded: number;
  charged: number;
  refunded: number;
}

export interface Usage {
  since: string;
  days: UsageDay[];
  totals: { charged: number; refunded: number };
  images: ImagesDay[];
  byKeyAndModel: UsageBreakdown[];
}

export interface LedgerRow {
  id: string;
  amount: number;
  balanceAfter: number;
  kind: LedgerKind;
  reason: string | null;
  batchId: string | null;
  taskId: string | null;
  keyId: string | null;
  createdAt: Date;
}

export const MAX_USAGE_DAYS = 366;

/** Parses `days`: an integer 1..366, default 30. */
export function parseDays(raw: unknown, fallback = 30): number {
  if (raw === undefined || raw === '') return fallback;
  const s = queryText(raw);
  const n = /^\d+$/.test(s) ? Number(s) : NaN;
  if (!(n >= 1 && n <= MAX_USAGE_DAYS)) {
    throw invalidRequest(
      'days',
      /^\d+$/.test(s) ? 'out_of_range' : 'not_an_integer',
      `days must be an integer from 1 to ${MAX_USAGE_DAYS}`,
    );
  }
  return n;
}

/** A row of the ledger page's statement (bigints as text). */
interface LedgerEntryRow {
  entry_id: string;
  amount: string;
  balance_after: string;
  kind: LedgerKind;
  reason: string | null;
  batch_id: string | null;
  task_id: string | null;
  api_key_id: string | null;
  created_at: Date;
  cursor_at: string;
}

/** Read-only views of an account's ledger for its holder. Every query is scoped by account. */
@Injectable()
export class UsageService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Credits charged and refunded per UTC day per key over the last `days` days (today
   * included). A row belongs to the day it was written, so a refund shows on the day it
   * happened and the totals equal the balance movement of the window; the daily cap
   * (BillingService.creditsUsedToday) instead counts a refund against the day of its charge.
   */
  async usage(accountId: string, days: number): Promise<Usage> {
    const now = new Date();
    const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1)));
    const rows = await queryRows<{ day: string; key_id: string | null; charged: string; refunded: string }>(
      this.db,
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
              api_key_id AS key_id,
              COALESCE(-SUM(amount) FILTER (WHERE kind = '${CHARGE_KIND}'), 0) AS charged,
              COALESCE(SUM(amount) FILTER (WHERE kind IN ${REFUND_KINDS_SQL}), 0) AS refunded
         FROM ledger_entries
        WHERE account_id = $1 AND created_at >= $2 AND kind IN ${USAGE_KINDS_SQL}
        GROUP BY 1, 2
        ORDER BY 1, 2 NULLS FIRST`,
      [accountId, since],
    );
    const out = rows.map((r) => ({ day: r.day, keyId: r.key_id, charged: Number(r.charged), refunded: Number(r.refunded) }));
    // From the batch rows (batches_account_created_idx), not the tasks: one row per batch.
    const images = await queryRows<{ day: string; ordered: string; succeeded: string }>(
      this.db,
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, SUM(total) AS ordered, SUM(succeeded_count) AS succeeded
         FROM batches
        WHERE account_id = $1 AND created_at >= $2
        GROUP BY 1
        ORDER BY 1`,
      [accountId, since],
    );
    const breakdown = await queryRows<
      Record<'key_id' | 'model' | 'batches' | 'ordered' | 'succeeded' | 'charged' | 'refunded', string | null>
    >(
      this.db,
      `SELECT api_key_id AS key_id, model, COUNT(*) AS batches, SUM(total) AS ordered, SUM(succeeded_count) AS succeeded,
              SUM(credits_charged) AS charged, SUM(credits_refunded) AS refunded
         FROM batches
        WHERE account_id = $1 AND created_at >= $2
        GROUP BY 1, 2
        ORDER BY 1 NULLS FIRST, 2`,
      [accountId, since],
    );
    return {
      since: utcDay(since),
      days: out,
      images: images.map((r) => ({ day: r.day, ordered: Number(r.ordered), succeeded: Number(r.succeeded) })),
      byKeyAndModel: breakdown.map((r) => ({
        keyId: r.key_id,
        model: r.model!,
        batches: Number(r.batches),
        ordered: Number(r.ordered),
        succeeded: Number(r.succeeded),
        charged: Number(r.charged),
        refunded: Number(r.refunded),
      })),
      totals: {
        charged: out.reduce((s, d) => s + d.charged, 0),
        refunded: out.reduce((s, d) => s + d.refunded, 0),
      },
    };
  }

  /** Newest first, keyset on (created_at, id). */
  async ledger(accountId: string, limit: number, cursor: string | undefined): Promise<{ entries: LedgerRow[]; nextCursor: string | null }> {
    const after = decodeLedgerCursor(cursor);
    const params: unknown[] = [accountId, limit + 1];
    let where = 'account_id = $1';
    if (after) {
      params.push(after.createdAt, after.id);
      where += ' AND (created_at, id) < ($3::timestamptz, $4::bigint)';
    }
    // The text copy of id gets its own alias: ORDER BY id would sort that text ('9' > '10').
    const rows = await queryRows<LedgerEntryRow>(
      this.db,
      `SELECT id::text AS entry_id, amount, balance_after, kind, reason, batch_id, task_id, api_key_id, created_at,
              to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_at
         FROM ledger_entries
        WHERE ${where}
        ORDER BY created_at DESC, id DESC
        LIMIT $2`,
      params,
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      entries: page.map((r) => ({
        id: r.entry_id,
        amount: Number(r.amount),
        balanceAfter: Number(r.balance_after),
        kind: r.kind,
        reason: r.reason,
        batchId: r.batch_id,
        taskId: r.task_id,
        keyId: r.api_key_id,
        createdAt: new Date(r.created_at),
      })),
      nextCursor: rows.length > limit && last ? encodeLedgerCursor({ createdAt: last.cursor_at, id: last.entry_id }) : null,
    };
  }
}
