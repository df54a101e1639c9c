import { Client } from 'pg';

/**
 * Records the text of every statement sent to PostgreSQL from this process while it runs,
 * whichever way it was sent: through TypeORM or straight to the pool (queryPrepared). Spies
 * on node-postgres' Client, where both paths end. Whitespace is collapsed. What was recorded
 * stays readable after `restore()`.
 */
export function recordSql(): { statements(): string[]; clear(): void; restore(): void } {
  const spy = jest.spyOn(Client.prototype, 'query');
  const textOf = (arg: unknown): string => (typeof arg === 'string' ? arg : String((arg as { text?: string } | undefined)?.text ?? ''));
  const recorded = (): string[] => spy.mock.calls.map((c) => textOf(c[0]).replace(/\s+/g, ' ').trim());
  let kept: string[] | null = null;
  return {
    statements: () => kept ?? recorded(),
    clear: () => spy.mockClear(),
    restore: () => {
      kept = recorded();
      spy.mockRestore();
    },
  };
}
