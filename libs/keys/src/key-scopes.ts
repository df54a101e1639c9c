export const ALL_SCOPES = ['models:read', 'account:read', 'batches:read', 'batches:write', 'uploads:write', 'webhooks:manage'] as const;
export type Scope = (typeof ALL_SCOPES)[number];

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && (ALL_SCOPES as readonly string[]).includes(value);
}
