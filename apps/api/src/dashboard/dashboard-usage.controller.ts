import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { parseDays, UsageService } from '@app/billing';
import { AuthenticatedSession } from '@app/sessions';
import { ErrorResponseDto } from '../common/error.response.dto';
import { UsageQueryDto } from './dto/dashboard.request.dto';
import { UsageResponseDto } from './dto/dashboard.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

@ApiTags('Dashboard')
@SessionAuth()
@ApiResponse({ status: 400, description: 'invalid_request (days)', type: ErrorResponseDto })
@Controller('dashboard/usage')
export class DashboardUsageController {
  constructor(private readonly usage: UsageService) {}

  @Get()
  @ApiOperation({
    operationId: 'getDashboardUsage',
    summary: 'Credits charged and refunded per UTC day and per key over the last `days` days',
    description:
      'Each ledger row counts on the UTC day it was written, so a refund shows on the day it happened. ' +
      'keyId is null for batches created from the dashboard. Grants and adjustments are not usage (see the ledger).',
  })
  @ApiOkResponse({ type: UsageResponseDto })
  async get(@CurrentSession() auth: AuthenticatedSession, @Query() q: UsageQueryDto): Promise<UsageResponseDto> {
    return UsageResponseDto.from(await this.usage.usage(auth.account.id, parseDays(q.days)));
  }
}
