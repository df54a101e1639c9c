import type { EntityManager } from 'typeorm';

/**
 * Rows of a raw query. TypeORM's postgres driver returns `[rows, affected]` for UPDATE and
 * DELETE (even with RETURNING) but plain rows for SELECT and INSERT; this hides the difference.
 */
export async function queryRows<T = Record<string, unknown>>(
  m: Pick<EntityManager, 'query'>,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const result = await m.query(sql, params);
  if (/^\s*(update|delete)\b/i.test(sql) && Array.isArray(result) && result.length === 2 && Array.isArray(result[0])) {
    return result[0] as T[];
  }
  return result as T[];
}
