import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { AuthenticatedSession, parseDays, UsageService } from '@app/dashboard';
import { parseLimit } from '@app/database';
import { ErrorResponseDto } from '../common/error.response.dto';
import { LedgerQueryDto, UsageQueryDto } from './dto/dashboard.request.dto';
import { LedgerEntryDto, LedgerResponseDto, UsageResponseDto } from './dto/dashboard.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

@ApiTags('Dashboard')
@SessionAuth()
@ApiResponse({ status: 400, description: 'invalid_request (days, limit or cursor)', type: ErrorResponseDto })
@Controller('dashboard')
export class DashboardUsageController {
  constructor(private readonly usage: UsageService) {}

  @Get('usage')
  @ApiOperation({
    summary: 'Credits charged and refunded per UTC day and per key over the last `days` days',
    description:
      'Each ledger row counts on the UTC day it was written, so a refund shows on the day it happened. ' +
      'keyId is null for batches created from the dashboard. Grants and adjustments are not usage (see the ledger).',
  })
  @ApiOkResponse({ type: UsageResponseDto })
  async get(@CurrentSession() auth: AuthenticatedSession, @Query() q: UsageQueryDto): Promise<UsageResponseDto> {
    return UsageResponseDto.from(await this.usage.usage(auth.account.id, parseDays(q.days)));
  }

  @Get('ledger')
  @ApiOperation({ summary: 'The credit ledger, newest first: every change of balance and why' })
  @ApiOkResponse({ type: LedgerResponseDto })
  async ledger(@CurrentSession() auth: AuthenticatedSession, @Query() q: LedgerQueryDto): Promise<LedgerResponseDto> {
    const page = await this.usage.ledger(auth.account.id, parseLimit(q.limit), q.cursor);
    return { entries: page.entries.map(LedgerEntryDto.from), nextCursor: page.nextCursor };
  }
}
