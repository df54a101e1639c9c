import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { queryRows, queryText } from '@app/database';
import { invalidRequest } from '@app/errors';
import { CHARGE_KIND, REFUND_KINDS_SQL, USAGE_KINDS_SQL, utcDay } from './billing.service';
import { MAX_USAGE_DAYS } from './usage.service';

export const USAGE_GROUPINGS = ['day', 'model', 'account', 'route', 'key'] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/** One row of the operator's usage report (docs/admin.md "Usage and margin"). */
export interface OperatorUsageRow {
  day?: string;
  model?: string | null;
  accountId?: string;
  /** The route that made the tasks (groupBy=route): its preset, else `<type>/<model>`, else its type. */
  route?: string | null;
  /** The API key that created the batches (groupBy=key); null: batches made without one. */
  apiKeyId?: string | null;
  /** Tasks that succeeded / failed for good in the window. */
  images: number;
  failed: number;
  /** Tasks whose upstream-billed image no price covered (recorded unpriced, not in upstreamCostUsd). */
  unpricedImages: number;
  creditsCharged: number;
  creditsRefunded: number;
  upstreamCostUsd: number;
  /** Net credits (charged - refunded) x CREDIT_VALUE_USD. */
  revenueUsd: number;
  marginUsd: number;
}

export interface UsageWindow {
  /** First and last UTC day, both included. */
  from: string;
  to: string;
  groupBy: UsageGrouping;
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const MS_PER_DAY = 86_400_000;

/** Parses the report's query (`from`, `to`: YYYY-MM-DD, at most 366 days; `groupBy`); defaults: the last 30 days by day. */
export function parseUsageWindow(query: { from?: unknown; to?: unknown; groupBy?: unknown }, today = utcDay()): UsageWindow {
  const day = (field: 'from' | 'to', raw: unknown, fallback: string): string => {
    if (raw === undefined || raw === '') return fallback;
    const s = queryText(raw);
    if (!DAY.test(s) || Number.isNaN(Date.parse(`${s}T00:00:00Z`)) || new Date(`${s}T00:00:00Z`).toISOString().slice(0, 10) !== s) {
      throw invalidRequest(field, 'not_a_date', `${field} must be a day, YYYY-MM-DD`);
    }
    return s;
  };
  const to = day('to', query.to, today);
  const from = day('from', query.from, utcDay(new Date(Date.parse(`${to}T00:00:00Z`) - 29 * MS_PER_DAY)));
  const span = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / MS_PER_DAY + 1;
  if (span < 1) throw invalidRequest('from', 'after_to', 'from must not be after to');
  if (span > MAX_USAGE_DAYS) throw invalidRequest('to', 'out_of_range', `At most ${MAX_USAGE_DAYS} days`);
  const groupBy = query.groupBy === undefined || query.groupBy === '' ? 'day' : queryText(query.groupBy);
  if (!(USAGE_GROUPINGS as readonly string[]).includes(groupBy)) {
    throw invalidRequest('groupBy', 'invalid', `groupBy must be one of ${USAGE_GROUPINGS.join(', ')}`);
  }
  return { from, to, groupBy: groupBy as UsageGrouping };
}

/** A route as the report names it: its preset, else `<type>/<model>`, else its type (a local type has no model). */
const routeLabelSql = (route: string) => `COALESCE(${route}->>'preset', concat_ws('/', ${route}->>'type', ${route}->>'model'))`;

/**
 * The SQL each grouping keys ledger rows (l, with their batch b) and tasks (t, with b) by;
 * a missing key (a ledger row whose batch is gone) is '' in the join (a FULL JOIN needs `=`).
 */
const KEYS: Record<UsageGrouping, { ledger: string; tasks: string }> = {
  day: {
    ledger: `to_char(l.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
    tasks: `to_char(t.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  },
  model: { ledger: 'b.model', tasks: 'b.model' },
  account: { ledger: 'l.account_id::text', tasks: 't.account_id::text' },
  // Money by the batch's first route (a charge is the batch's); work and cost by the route of
  // its chain that made each image (tasks.route_index), which is the first unless it failed over.
  route: { ledger: routeLabelSql('b.provider'), tasks: routeLabelSql('COALESCE(b.routes -> t.route_index, b.provider)') },
  key: { ledger: 'b.api_key_id::text', tasks: 'b.api_key_id::text' },
};

/**
 * The operator's view of what Kiln earned and what its upstreams cost (never shown to
 * account holders). Money comes from the ledger (a row belongs to the day it was written, as
 * in the holder's usage view, so the report's credits are the ledger's), work from the tasks
 * that ended in the window with the upstream cost each recorded when it ended. Sums are
 * integers (credits, micro-dollars) until the last step.
 */
@Injectable()
export class OperatorUsageService {
  constructor(@InjectDataSource() private readonly db: DataSource) {}

  async report(window: UsageWindow, creditValueUsd: number): Promise<OperatorUsageRow[]> {
    const start = new Date(`${window.from}T00:00:00Z`);
    const end = new Date(Date.parse(`${window.to}T00:00:00Z`) + MS_PER_DAY);
    const key = KEYS[window.groupBy];
    const rows = await queryRows<Record<string, string | null>>(
      this.db,
      `WITH money AS (
         SELECT COALESCE(${key.ledger}, '') AS k,
                COALESCE(-SUM(l.amount) FILTER (WHERE l.kind = '${CHARGE_KIND}'), 0) AS charged,
                COALESCE(SUM(l.amount) FILTER (WHERE l.kind IN ${REFUND_KINDS_SQL}), 0) AS refunded
           FROM ledger_entries l LEFT JOIN batches b ON b.id = l.batch_id
          WHERE l.created_at >= $1 AND l.created_at < $2 AND l.kind IN ${USAGE_KINDS_SQL}
          GROUP BY 1
       ), work AS (
         SELECT COALESCE(${key.tasks}, '') AS k,
                count(*) FILTER (WHERE t.status = 'succeeded') AS images,
                count(*) FILTER (WHERE t.status = 'failed') AS failed,
                count(*) FILTER (WHERE t.upstream_cost_micros IS NULL) AS unpriced,
                COALESCE(SUM(t.upstream_cost_micros), 0) AS cost_micros
           FROM tasks t JOIN batches b ON b.id = t.batch_id
          WHERE t.finished_at >= $1 AND t.finished_at < $2
          GROUP BY 1
       )
       SELECT NULLIF(COALESCE(m.k, w.k), '') AS k, COALESCE(w.images, 0) AS images, COALESCE(w.failed, 0) AS failed,
              COALESCE(w.unpriced, 0) AS unpriced,
              COALESCE(m.charged, 0) AS charged, COALESCE(m.refunded, 0) AS refunded, COALESCE(w.cost_micros, 0) AS cost_micros
         FROM money m FULL JOIN work w ON m.k = w.k
        ORDER BY 1 NULLS LAST`,
      [start, end],
    );
    // A credit's value in whole micro-dollars, so revenue and margin stay exact integers until shown.
    const creditMicros = Math.round(creditValueUsd * 1_000_000);
    return rows.map((r) => {
      const charged = Number(r.charged);
      const refunded = Number(r.refunded);
      const costMicros = Number(r.cost_micros);
      const revenueMicros = (charged - refunded) * creditMicros;
      return {
        ...groupOf(window.groupBy, r.k),
        images: Number(r.images),
        failed: Number(r.failed),
        unpricedImages: Number(r.unpriced),
        creditsCharged: charged,
        creditsRefunded: refunded,
        upstreamCostUsd: costMicros / 1_000_000,
        revenueUsd: revenueMicros / 1_000_000,
        marginUsd: (revenueMicros - costMicros) / 1_000_000,
      };
    });
  }
}

function groupOf(groupBy: UsageGrouping, k: string | null): Partial<OperatorUsageRow> {
  switch (groupBy) {
    case 'day':
      return { day: k as string };
    case 'model':
      return { model: k };
    case 'account':
      return { accountId: k as string };
    case 'route':
      return { route: k };
    case 'key':
      return { apiKeyId: k };
  }
}

/** The row fields of the CSV form after the group's column, in order. */
const CSV_FIELDS = [
  'images',
  'failed',
  'unpricedImages',
  'creditsCharged',
  'creditsRefunded',
  'upstreamCostUsd',
  'revenueUsd',
  'marginUsd',
] as const satisfies readonly (keyof OperatorUsageRow)[];

/** The group's column in each grouping. */
const GROUP_COLUMN: Record<UsageGrouping, keyof OperatorUsageRow> = {
  day: 'day',
  model: 'model',
  account: 'accountId',
  route: 'route',
  key: 'apiKeyId',
};

/** A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
const csvField = (v: string | number | null | undefined): string => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

/** The report as CSV (`Accept: text/csv`): a header line, then one line per row, CRLF-terminated. */
export function usageReportCsv(rows: OperatorUsageRow[], groupBy: UsageGrouping): string {
  const columns = [GROUP_COLUMN[groupBy], ...CSV_FIELDS];
  const lines = [columns.join(','), ...rows.map((row) => columns.map((c) => csvField(row[c])).join(','))];
  return lines.map((l) => `${l}\r\n`).join('');
}
