import { Check, Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

const bigintToNumber = { to: (v: number) => v, from: (v: string) => Number(v) };

/**
 * What an account holder can buy (migration 1763888400320): credits for a price, in the
 * smallest unit of the currency (cents; yen for JPY). Archived (active = false), never
 * deleted: purchases keep pointing at the pack they bought. Written by libs/payments only.
 */
@Entity({ name: 'credit_packs' })
@Check('credit_packs_credits_positive', '"credits" > 0')
@Check('credit_packs_price_positive', '"price_cents" > 0')
@Check('credit_packs_currency_iso', `"currency" ~ '^[a-z]{3}$'`)
export class CreditPackEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'PK_credit_packs' })
  id: string;

  /** What Checkout shows the buyer as the product's name. */
  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'bigint', transformer: bigintToNumber })
  credits: number;

  @Column({ name: 'price_cents', type: 'bigint', transformer: bigintToNumber })
  priceCents: number;

  /** ISO 4217, lower case as Stripe writes it. */
  @Column({ type: 'text' })
  currency: string;

  @Column({ type: 'boolean', default: true })
  active: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
