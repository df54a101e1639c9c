import { ApiProperty } from '@nestjs/swagger';
import { ApiKeyEntity } from '@app/database';
import { BUDGET_PERIODS, budgetOf, creditCapPerDayOf, nextUtcMidnight, periodResetsAt } from '@app/billing';

/** A key's budget and its current period's spend (docs/billing.md#per-key-budgets). */
export class KeyBudgetDto {
  @ApiProperty({ type: 'integer' }) credits: number;
  @ApiProperty({ enum: BUDGET_PERIODS, description: 'UTC calendar period: day, ISO week from Monday, month' }) period: string;
  @ApiProperty({ type: 'integer', description: 'Credits spent through the key in the current period (refunds given back)' })
  spent: number;
  @ApiProperty({ description: 'Unix ms of the start of the next period' }) resetsAt: number;

  /** The budget of a key (null: none), with what was spent in its period. */
  static of(k: Pick<ApiKeyEntity, 'creditCapPerDay' | 'budgetCredits' | 'budgetPeriod'>, spent: number): KeyBudgetDto | null {
    const budget = budgetOf(k);
    return budget ? { credits: budget.credits, period: budget.period, spent, resetsAt: periodResetsAt(budget.period) } : null;
  }
}

export class KeyDto {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ example: 'kiln_live_abcd...wxyz' }) hint: string;
  @ApiProperty({ type: [String] }) scopes: string[];
  @ApiProperty({ type: 'integer', nullable: true, description: "A day budget's credits (v1's spelling); null otherwise" })
  creditCapPerDay: number | null;
  @ApiProperty({ type: 'integer' }) creditsUsedToday: number;
  @ApiProperty({ description: 'Unix ms of the next 00:00 UTC' }) capResetsAt: number;
  @ApiProperty({ type: KeyBudgetDto, nullable: true }) budget: KeyBudgetDto | null;
  @ApiProperty({ type: [String], description: 'Models this key may use; empty: every model' }) models: string[];
  @ApiProperty({ description: 'Unix ms' }) createdAt: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix ms, kept to the minute' }) lastUsedAt: number | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix ms' }) revokedAt: number | null;

  /** `budgetSpent`: the key's spend in its budget's period (BillingService.budgetSpentByKey); 0 for a new key. */
  static from(k: ApiKeyEntity, creditsUsedToday: number, budgetSpent = 0): KeyDto {
    return {
      id: k.id,
      name: k.name,
      hint: k.hint,
      scopes: k.scopes,
      creditCapPerDay: creditCapPerDayOf(k),
      creditsUsedToday,
      capResetsAt: nextUtcMidnight(),
      budget: KeyBudgetDto.of(k, budgetSpent),
      models: k.models,
      createdAt: k.createdAt.getTime(),
      lastUsedAt: k.lastUsedAt ? k.lastUsedAt.getTime() : null,
      revokedAt: k.revokedAt ? k.revokedAt.getTime() : null,
    };
  }
}

export class KeyResponseDto {
  @ApiProperty({ type: KeyDto }) key: KeyDto;
}

export class CreatedKeyResponseDto {
  @ApiProperty({ type: KeyDto }) key: KeyDto;
  @ApiProperty({ description: 'The full key. Shown only in this response; store it now.', example: 'kiln_live_...' })
  secret: string;
}
