import { ApiProperty } from '@nestjs/swagger';
import { ACCOUNT_STATUSES, PLAN_KEYS } from '@app/database';

export class MeUserDto {
  @ApiProperty() id: string;
  @ApiProperty() email: string;
  @ApiProperty({ enum: PLAN_KEYS }) plan: string;
  @ApiProperty({ enum: ACCOUNT_STATUSES }) status: string;
  @ApiProperty({ description: 'Unix milliseconds' }) createdAt: number;
}

export class MeCreditsDto {
  @ApiProperty({ type: 'integer' }) balance: number;
}

export class MeLimitsDto {
  @ApiProperty({ type: 'integer' }) maxImagesPerBatch: number;
  @ApiProperty({ type: 'integer' }) maxConcurrentBatches: number;
  @ApiProperty({ type: 'integer' }) activeBatches: number;
}

export class MeKeyDto {
  @ApiProperty() id: string;
  @ApiProperty({ type: [String] }) scopes: string[];
  @ApiProperty({ type: 'integer', nullable: true }) creditCapPerDay: number | null;
  @ApiProperty({ type: 'integer' }) creditsUsedToday: number;
  @ApiProperty({ description: 'Unix ms of the next 00:00 UTC' }) capResetsAt: number;
}

export class MeResponseDto {
  @ApiProperty({ type: MeUserDto }) user: MeUserDto;
  @ApiProperty({ type: MeCreditsDto }) credits: MeCreditsDto;
  @ApiProperty({ type: MeLimitsDto }) limits: MeLimitsDto;
  @ApiProperty({ type: MeKeyDto }) key: MeKeyDto;
}
