import { invalidRequest } from '@app/errors';
import { BATCH_STATUSES, BatchStatus, queryText } from '@app/database';

/** The batch list's filters (GET /v1/dashboard/batches): every one optional, all of them ANDed. */
export interface BatchFilter {
  statuses?: BatchStatus[];
  model?: string;
  /** created_at >= from */
  from?: Date;
  /** created_at < to */
  to?: Date;
  /** Text the note or a prompt contains, case-insensitively. */
  text?: string;
}

export const MAX_SEARCH_LENGTH = 200;

/** A date (`2026-11-28`, a UTC day) or an ISO 8601 instant; `to` as a day means the end of that day. */
function parseDate(field: string, raw: unknown, endOfDay: boolean): Date | undefined {
  if (raw === undefined || raw === '') return undefined;
  const s = queryText(raw);
  const day = /^\d{4}-\d{2}-\d{2}$/.test(s);
  if (!day && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/.test(s))
    throw invalidRequest(field, 'not_a_date', `${field} must be a date (YYYY-MM-DD) or an ISO 8601 instant with its zone`);
  const at = new Date(day ? `${s}T00:00:00Z` : s);
  if (Number.isNaN(at.getTime()) || (day && at.toISOString().slice(0, 10) !== s))
    throw invalidRequest(field, 'not_a_date', `${field} is not a real date`);
  return endOfDay && day ? new Date(at.getTime() + 86_400_000) : at;
}

/** The query string's filters, checked: a bad value is a 400 `invalid_request` naming its field. */
export function parseBatchFilter(q: { status?: unknown; model?: unknown; from?: unknown; to?: unknown; q?: unknown }): BatchFilter {
  const filter: BatchFilter = {};
  if (q.status !== undefined && q.status !== '') {
    const statuses = queryText(q.status).split(',');
    const bad = statuses.find((s) => !(BATCH_STATUSES as readonly string[]).includes(s));
    if (bad !== undefined)
      throw invalidRequest('status', 'not_a_status', `status must be a comma-separated list of ${BATCH_STATUSES.join(', ')}`);
    filter.statuses = [...new Set(statuses)] as BatchStatus[];
  }
  if (q.model !== undefined && q.model !== '') {
    const model = queryText(q.model);
    if (!/^[a-z0-9][a-z0-9._-]{0,63}$/.test(model)) throw invalidRequest('model', 'not_a_model_key', 'model must be a model key');
    filter.model = model;
  }
  filter.from = parseDate('from', q.from, false);
  filter.to = parseDate('to', q.to, true);
  if (filter.from && filter.to && filter.from >= filter.to) throw invalidRequest('to', 'before_from', 'to must be after from');
  if (q.q !== undefined && q.q !== '') {
    const text = queryText(q.q).trim();
    if (text.length === 0 || [...text].length > MAX_SEARCH_LENGTH)
      throw invalidRequest('q', 'out_of_range', `q must be 1 to ${MAX_SEARCH_LENGTH} characters`);
    filter.text = text;
  }
  for (const k of Object.keys(filter) as Array<keyof BatchFilter>) if (filter[k] === undefined) delete filter[k];
  return filter;
}

/** `%` and `_` are LIKE's wildcards, `\` its escape: a search for them finds them. */
export function likeContaining(text: string): string {
  return '%' + text.replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}
