import { ApiProperty } from '@nestjs/swagger';
import { ACCOUNT_STATUSES, PLAN_KEYS } from '@app/database';
import { KeyBudgetDto } from '../common/key.response.dto';

export class MeUserDto {
  @ApiProperty() id: string;
  @ApiProperty() email: string;
  @ApiProperty({ enum: PLAN_KEYS }) plan: string;
  @ApiProperty({ enum: ACCOUNT_STATUSES }) status: string;
  @ApiProperty({ description: 'Unix milliseconds' }) createdAt: number;
}

export class MeCreditsDto {
  @ApiProperty({ type: 'integer' }) balance: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'The credits.low alert line; null: none' })
  lowCreditsThreshold: number | null;
}

export class MeLimitsDto {
  @ApiProperty({ type: 'integer' }) maxImagesPerBatch: number;
  @ApiProperty({ type: 'integer', description: 'Standard batches not done at once' }) maxConcurrentBatches: number;
  @ApiProperty({ type: 'integer', description: 'Standard batches not done yet' }) activeBatches: number;
  @ApiProperty({ type: 'integer', description: 'Economy batches not done at once (0: no economy tier on the plan)', example: 2 })
  maxConcurrentEconomyBatches: number;
  @ApiProperty({ type: 'integer', description: 'Economy batches not done yet' }) activeEconomyBatches: number;
}

export class MeKeyDto {
  @ApiProperty() id: string;
  @ApiProperty({ type: [String] }) scopes: string[];
  @ApiProperty({ type: 'integer', nullable: true, description: "A day budget's credits (v1's spelling); null otherwise" })
  creditCapPerDay: number | null;
  @ApiProperty({ type: 'integer' }) creditsUsedToday: number;
  @ApiProperty({ description: 'Unix ms of the next 00:00 UTC' }) capResetsAt: number;
  @ApiProperty({ type: KeyBudgetDto, nullable: true }) budget: KeyBudgetDto | null;
  @ApiProperty({ type: [String], description: 'Models this key may use; empty: every model' }) models: string[];
}

export class MeResponseDto {
  @ApiProperty({ type: MeUserDto }) user: MeUserDto;
  @ApiProperty({ type: MeCreditsDto }) credits: MeCreditsDto;
  @ApiProperty({ type: MeLimitsDto }) limits: MeLimitsDto;
  @ApiProperty({ type: MeKeyDto }) key: MeKeyDto;
}
