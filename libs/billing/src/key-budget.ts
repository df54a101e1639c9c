import { EntityManager } from 'typeorm';
import { queryRows } from '@app/database';
import { ErrorCode, KilnError } from '@app/errors';
import { USAGE_KINDS_SQL } from './ledger-kinds';

/** The calendar periods a key's budget may have: UTC day, ISO week (from Monday), month. */
export const BUDGET_PERIODS = ['day', 'week', 'month'] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

const ADJECTIVE: Record<BudgetPeriod, string> = { day: 'daily', week: 'weekly', month: 'monthly' };

/** A key's budget: at most `credits` spent through it per UTC calendar `period`. */
export interface KeyBudget {
  credits: number;
  period: BudgetPeriod;
}

/** The budget columns of an api_keys row; credit_cap_per_day is v1's spelling of a day budget. */
export interface KeyBudgetColumns {
  creditCapPerDay: number | null;
  budgetCredits: number | null;
  budgetPeriod: BudgetPeriod | null;
}

/**
 * A key's one budget, whichever spelling set it (null: none). Setting one spelling clears
 * the other (KeysService), so at most one is stored; `v1` says the budget was set as
 * `creditCapPerDay`, whose refusal keeps v1's code (budgetRefusal).
 */
export function budgetOf(k: KeyBudgetColumns): (KeyBudget & { v1: boolean }) | null {
  if (k.creditCapPerDay !== null) return { credits: k.creditCapPerDay, period: 'day', v1: true };
  if (k.budgetCredits !== null && k.budgetPeriod !== null) return { credits: k.budgetCredits, period: k.budgetPeriod, v1: false };
  return null;
}

/** v1's `creditCapPerDay` read from either spelling: a day budget's credits, else null. */
export function creditCapPerDayOf(k: KeyBudgetColumns): number | null {
  const budget = budgetOf(k);
  return budget?.period === 'day' ? budget.credits : null;
}

/** The UTC start of the calendar period containing `at`. */
export function periodStart(period: BudgetPeriod, at: Date = new Date()): Date {
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const d = at.getUTCDate();
  if (period === 'month') return new Date(Date.UTC(y, m, 1));
  if (period === 'week') return new Date(Date.UTC(y, m, d - ((at.getUTCDay() + 6) % 7)));
  return new Date(Date.UTC(y, m, d));
}

/** Unix ms of the start of the next period: when the budget's spend starts again from 0. */
export function periodResetsAt(period: BudgetPeriod, at: Date = new Date()): number {
  const start = periodStart(period, at);
  const y = start.getUTCFullYear();
  const m = start.getUTCMonth();
  const d = start.getUTCDate();
  if (period === 'month') return Date.UTC(y, m + 1, 1);
  return Date.UTC(y, m, d + (period === 'week' ? 7 : 1));
}

/**
 * Credits spent through each key in its current period: its charges minus the refunds of
 * those charges, each counted on its charge's UTC day (a refund carries its charge's day, so
 * it gives back to the period the charge counted against, never to a later one). One query
 * for any number of keys; a key without spend gets 0. Under the key's row lock (the charge's
 * transaction) the figure cannot move until commit.
 */
export async function spentInPeriodByKey(
  m: Pick<EntityManager, 'query'>,
  keys: readonly { id: string; period: BudgetPeriod }[],
  at: Date = new Date(),
): Promise<Map<string, number>> {
  const spent = new Map<string, number>(keys.map((k) => [k.id, 0]));
  if (keys.length === 0) return spent;
  const rows = await queryRows<{ key_id: string; spent: string }>(
    m,
    `SELECT k.id AS key_id, COALESCE(-SUM(l.amount), 0) AS spent
       FROM unnest($1::uuid[], $2::date[]) AS k(id, since)
       JOIN ledger_entries l ON l.api_key_id = k.id AND l.charge_day >= k.since
      WHERE l.kind IN ${USAGE_KINDS_SQL}
      GROUP BY k.id`,
    [keys.map((k) => k.id), keys.map((k) => periodStart(k.period, at).toISOString().slice(0, 10))],
  );
  for (const r of rows) spent.set(r.key_id, Number(r.spent));
  return spent;
}

/** A key's budget (null: none) and what was spent through the key in its current period. */
export async function keyBudgetUse(
  m: Pick<EntityManager, 'query'>,
  apiKeyId: string,
  columns: KeyBudgetColumns,
): Promise<{ budget: KeyBudget & { v1: boolean }; spent: number } | null> {
  const budget = budgetOf(columns);
  if (!budget) return null;
  const spent = await spentInPeriodByKey(m, [{ id: apiKeyId, period: budget.period }]);
  return { budget, spent: spent.get(apiKeyId) ?? 0 };
}

/**
 * The refusal of a batch costing `required` that would take a key past its budget, or null.
 * A budget set as v1's `creditCapPerDay` keeps v1's answer exactly (402
 * daily_credit_cap_exceeded, details { cap, used, required, resetsAt }); one set as `budget`
 * answers 403 key_budget_exceeded, details { budget, spent, required, period, resetsAt }.
 */
export function budgetRefusal(budget: KeyBudget & { v1: boolean }, spent: number, required: number): KilnError | null {
  if (spent + required <= budget.credits) return null;
  const resetsAt = periodResetsAt(budget.period);
  if (budget.v1) {
    return new KilnError(ErrorCode.DailyCreditCapExceeded, "This batch would exceed the key's daily credit cap", {
      cap: budget.credits,
      used: spent,
      required,
      resetsAt,
    });
  }
  return new KilnError(ErrorCode.KeyBudgetExceeded, `This batch would exceed the key's ${ADJECTIVE[budget.period]} budget`, {
    budget: budget.credits,
    spent,
    required,
    period: budget.period,
    resetsAt,
  });
}
