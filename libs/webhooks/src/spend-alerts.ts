import { EntityManager } from 'typeorm';
import { KeyBudget, periodResetsAt, periodStart } from '@app/billing';
import { newEvent, OutboxEvent } from './webhook-events';
import { writeOutboxEvents } from './webhook-outbox';

/** The shares of a key's budget whose crossing writes a `key.budget.threshold` event. */
export const BUDGET_ALERT_PERCENTS = [80, 100] as const;

/** A batch charge, as its transaction knows it, under the account's and key's row locks. */
export interface ChargeForAlerts {
  accountId: string;
  batchId: string;
  amount: number;
  balanceAfter: number;
  /** The holder's lowCreditsThreshold; null: no `credits.low`. */
  lowCreditsThreshold: number | null;
  /** The creating key's budget and what it had spent in the period before this charge. */
  key: { id: string; budget: KeyBudget; spentBefore: number } | null;
}

/**
 * The alerts one charge crosses into. Stateless: a crossing is read from the figures before
 * and after the charge, which the row locks make exact, so each downward crossing fires once
 * and a balance (or a period's spend) that goes back over the line (a grant, a purchase, a
 * refund, a new period) re-arms it without any stored flag.
 */
export function spendAlertEvents(c: ChargeForAlerts, now = new Date()): OutboxEvent[] {
  const events: OutboxEvent[] = [];
  const before = c.balanceAfter + c.amount;
  const threshold = c.lowCreditsThreshold;
  if (threshold !== null && before >= threshold && c.balanceAfter < threshold) {
    events.push(newEvent(c.accountId, 'credits.low', { balance: c.balanceAfter, threshold, batchId: c.batchId }, now.getTime()));
  }
  if (c.key) {
    const { budget, spentBefore } = c.key;
    const spent = spentBefore + c.amount;
    for (const percent of BUDGET_ALERT_PERCENTS) {
      const line = (budget.credits * percent) / 100;
      if (spentBefore < line && spent >= line) {
        events.push(
          newEvent(
            c.accountId,
            'key.budget.threshold',
            {
              keyId: c.key.id,
              percent,
              budget: { credits: budget.credits, period: budget.period },
              spent,
              periodStart: periodStart(budget.period, now).getTime(),
              resetsAt: periodResetsAt(budget.period, now),
              batchId: c.batchId,
            },
            now.getTime(),
          ),
        );
      }
    }
  }
  return events;
}

/** Writes the alerts a charge crosses into, in the charge's transaction; no round trip when there are none. */
export async function recordSpendAlerts(m: EntityManager, c: ChargeForAlerts): Promise<void> {
  await writeOutboxEvents(m, spendAlertEvents(c));
}
