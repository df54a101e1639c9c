import { ApiProperty } from '@nestjs/swagger';
import { ApiKeyEntity } from '@app/database';
import { nextUtcMidnight } from '@app/billing';

export class KeyDto {
  @ApiProperty() id: string;
  @ApiProperty() name: string;
  @ApiProperty({ example: 'kiln_live_abcd...wxyz' }) hint: string;
  @ApiProperty({ type: [String] }) scopes: string[];
  @ApiProperty({ type: 'integer', nullable: true }) creditCapPerDay: number | null;
  @ApiProperty({ type: 'integer' }) creditsUsedToday: number;
  @ApiProperty({ description: 'Unix ms of the next 00:00 UTC' }) capResetsAt: number;
  @ApiProperty({ description: 'Unix ms' }) createdAt: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix ms, kept to the minute' }) lastUsedAt: number | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix ms' }) revokedAt: number | null;

  static from(k: ApiKeyEntity, creditsUsedToday: number): KeyDto {
    return {
      id: k.id,
      name: k.name,
      hint: k.hint,
      scopes: k.scopes,
      creditCapPerDay: k.creditCapPerDay,
      creditsUsedToday,
      capResetsAt: nextUtcMidnight(),
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
