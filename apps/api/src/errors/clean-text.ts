/**
 * The one text rule every request value obeys, whatever the route or DTO: no U+0000 (a
 * PostgreSQL text or jsonb value cannot hold it) and no UTF-16 surrogate without its pair
 * (it has no UTF-8 encoding, so PostgreSQL refuses it too). Either would otherwise reach the
 * database and come back as a 500 after work was spent.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export type UncleanReason = 'contains_nul' | 'lone_surrogate';

export function uncleanReason(s: string): UncleanReason | null {
  if (s.includes('\u0000')) return 'contains_nul';
  if (LONE_SURROGATE.test(s)) return 'lone_surrogate';
  return null;
}

/**
 * The first string in `value` (itself, an array item or an object's key or value, at any
 * depth) that breaks the rule, with its path as validation errors name fields (`prompts[2]`,
 * `provider.model`); null when every string is clean. The JSON parser has already bounded
 * the depth.
 */
export function findUncleanText(value: unknown, path: string): { field: string; reason: UncleanReason } | null {
  if (typeof value === 'string') {
    const reason = uncleanReason(value);
    return reason ? { field: path, reason } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUncleanText(value[i], `${path}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const field = path ? `${path}.${key}` : key;
      const reason = uncleanReason(key);
      if (reason) return { field, reason };
      const found = findUncleanText(item, field);
      if (found) return found;
    }
  }
  return null;
}
