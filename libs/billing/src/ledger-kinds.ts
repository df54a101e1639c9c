import { LedgerKind } from '@app/database';

/** Ledger kinds that give back (part of) a batch's charge. */
export const REFUND_KINDS: readonly LedgerKind[] = ['task_refund', 'cancel_refund'];
/** The ledger kind of a batch's charge. */
export const CHARGE_KIND: LedgerKind = 'batch_charge';
/** A list of ledger kinds as an SQL list: `('a', 'b')`. */
const kindsSql = (kinds: readonly LedgerKind[]): string => `(${kinds.map((k) => `'${k}'`).join(', ')})`;
/** REFUND_KINDS for `kind IN ...`, so a new refund kind reaches every query. */
export const REFUND_KINDS_SQL = kindsSql(REFUND_KINDS);
/** Ledger kinds a key's daily cap and the usage views count: charges and their refunds. */
export const USAGE_KINDS_SQL = kindsSql([CHARGE_KIND, ...REFUND_KINDS]);
