import { ApiProperty } from '@nestjs/swagger';
import type { LedgerRow, Usage } from '@app/billing';
import { LEDGER_KINDS } from '@app/database';
import type { IssuedSession } from '@app/sessions';
import { AccountDto } from '../../common/account.response.dto';
import { KeyDto } from '../../common/key.response.dto';

export class SessionResponseDto {
  @ApiProperty({ example: 'kiln_sess_...', description: 'Send as Authorization: Bearer <token> to /v1/dashboard routes' })
  token: string;

  @ApiProperty({ description: 'Unix ms' })
  expiresAt: number;

  static from(s: IssuedSession): SessionResponseDto {
    return { token: s.token, expiresAt: s.expiresAt.getTime() };
  }
}

export class DashboardLimitsDto {
  @ApiProperty({ type: 'integer' }) maxImagesPerBatch: number;
  @ApiProperty({ type: 'integer' }) maxConcurrentBatches: number;
  @ApiProperty({ type: 'integer' }) activeBatches: number;
  @ApiProperty({ type: 'integer', description: 'Economy batches not done at once (they do not count toward maxConcurrentBatches)' })
  maxConcurrentEconomyBatches: number;
  @ApiProperty({ type: 'integer' }) activeEconomyBatches: number;
  @ApiProperty({ type: 'integer', description: 'Unrevoked API keys allowed' }) maxKeys: number;
  @ApiProperty({ description: 'Whether API keys may call the public API' }) apiAccess: boolean;
  @ApiProperty({ type: 'integer', description: 'Per API key' }) requestsPerMinute: number;
}

export class DashboardAccountDto extends AccountDto {
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: 'A batch charge taking the balance below it sends a credits.low webhook event; null: none',
  })
  lowCreditsThreshold: number | null;
}

export class DashboardAccountResponseDto {
  @ApiProperty({ type: DashboardAccountDto }) account: DashboardAccountDto;
  @ApiProperty({ type: DashboardLimitsDto }) limits: DashboardLimitsDto;
  @ApiProperty({
    description: 'Whether this installation sells credits (STRIPE_SECRET_KEY set): the web app shows Buy credits only then',
  })
  purchasesEnabled: boolean;
}

export class KeyListResponseDto {
  @ApiProperty({ type: [KeyDto], description: 'Newest first, revoked keys included' }) keys: KeyDto[];
}

export class UsageDayDto {
  @ApiProperty({ example: '2025-01-31', description: 'UTC day the ledger rows were written' }) day: string;
  @ApiProperty({ type: 'string', nullable: true, description: 'null for batches created from the dashboard' }) keyId: string | null;
  @ApiProperty({ type: 'integer' }) charged: number;
  @ApiProperty({ type: 'integer' }) refunded: number;
}

export class UsageTotalsDto {
  @ApiProperty({ type: 'integer' }) charged: number;
  @ApiProperty({ type: 'integer' }) refunded: number;
}

export class ImagesDayDto {
  @ApiProperty({ example: '2025-01-31', description: 'UTC day the batches were created' }) day: string;
  @ApiProperty({ type: 'integer', description: 'Images those batches ordered' }) ordered: number;
  @ApiProperty({ type: 'integer', description: 'Images of those batches that succeeded so far' }) succeeded: number;
}

export class UsageBreakdownDto {
  @ApiProperty({ type: 'string', nullable: true, description: 'The key that created the batches; null for the dashboard' }) keyId:
    string | null;
  @ApiProperty({ example: 'eta-image' }) model: string;
  @ApiProperty({ type: 'integer' }) batches: number;
  @ApiProperty({ type: 'integer', description: 'Images those batches ordered' }) ordered: number;
  @ApiProperty({ type: 'integer', description: 'Images of those batches that succeeded so far' }) succeeded: number;
  @ApiProperty({ type: 'integer', description: 'Credits charged for those batches' }) charged: number;
  @ApiProperty({ type: 'integer', description: 'Credits refunded for them so far' }) refunded: number;
}

export class UsageResponseDto {
  @ApiProperty({ example: '2025-01-02', description: 'First UTC day of the window' }) since: string;
  @ApiProperty({ type: [UsageDayDto], description: 'Days and keys with activity only, oldest first' }) days: UsageDayDto[];
  @ApiProperty({ type: UsageTotalsDto }) totals: UsageTotalsDto;
  @ApiProperty({
    type: [ImagesDayDto],
    description: 'Per UTC day with batches, oldest first: images ordered and succeeded (the web app chart)',
  })
  images: ImagesDayDto[];
  @ApiProperty({
    type: [UsageBreakdownDto],
    description: 'The batches created in the window, per key and model (by the day a batch was created, unlike `days`)',
  })
  byKeyAndModel: UsageBreakdownDto[];

  static from(u: Usage): UsageResponseDto {
    return u;
  }
}

export class LedgerEntryDto {
  @ApiProperty() id: string;
  @ApiProperty({ type: 'integer', description: 'Signed: negative for charges' }) amount: number;
  @ApiProperty({ type: 'integer' }) balanceAfter: number;
  @ApiProperty({ enum: LEDGER_KINDS }) kind: string;
  @ApiProperty({ type: 'string', nullable: true }) reason: string | null;
  @ApiProperty({ type: 'string', nullable: true }) batchId: string | null;
  @ApiProperty({ type: 'string', nullable: true }) taskId: string | null;
  @ApiProperty({ type: 'string', nullable: true, description: 'The API key that made the charge' }) keyId: string | null;
  @ApiProperty({ description: 'Unix ms' }) createdAt: number;

  static from(r: LedgerRow): LedgerEntryDto {
    return { ...r, createdAt: r.createdAt.getTime() };
  }
}

export class LedgerResponseDto {
  @ApiProperty({ type: [LedgerEntryDto] }) entries: LedgerEntryDto[];
  @ApiProperty({ type: 'string', nullable: true }) nextCursor: string | null;
}
