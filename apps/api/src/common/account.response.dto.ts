import { ApiProperty } from '@nestjs/swagger';
import { ACCOUNT_STATUSES, AccountEntity, PLAN_KEYS } from '@app/database';

export class AccountDto {
  @ApiProperty() id: string;
  @ApiProperty() email: string;
  @ApiProperty({ enum: PLAN_KEYS }) plan: string;
  @ApiProperty({ enum: ACCOUNT_STATUSES }) status: string;
  @ApiProperty({ type: 'integer' }) balance: number;
  @ApiProperty({ description: 'Unix ms' }) createdAt: number;

  static from(a: AccountEntity): AccountDto {
    return {
      id: a.id,
      email: a.email,
      plan: a.planKey,
      status: a.status,
      balance: a.balance,
      createdAt: a.createdAt.getTime(),
    };
  }
}

export class AccountResponseDto {
  @ApiProperty({ type: AccountDto }) account: AccountDto;
}
