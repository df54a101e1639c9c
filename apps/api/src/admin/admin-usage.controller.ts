import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { OperatorUsageService, parseUsageWindow, USAGE_GROUPINGS } from '@app/billing';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { AdminGuard } from './admin.guard';
import { OperatorUsageResponseDto } from './admin.response.dto';

/** Operator API: what Kiln earned, what its upstreams cost, and the margin (never shown to account holders). */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/usage')
export class AdminUsageController {
  constructor(
    private readonly usage: OperatorUsageService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  @Get()
  @ApiOperation({
    operationId: 'getAdminUsage',
    summary: 'Images, credits, upstream cost, revenue and margin per UTC day, model or account',
    description:
      'Credits are the ledger rows written in the window (a refund counts on the day it happened); images, failures and ' +
      'upstream cost are the tasks that ended in it. revenueUsd = net credits x CREDIT_VALUE_USD.',
  })
  @ApiQuery({ name: 'from', required: false, description: 'First UTC day, YYYY-MM-DD (default: 29 days before to)' })
  @ApiQuery({ name: 'to', required: false, description: 'Last UTC day, YYYY-MM-DD, included (default: today); at most 366 days' })
  @ApiQuery({ name: 'groupBy', required: false, enum: USAGE_GROUPINGS, description: 'default day' })
  @ApiOkResponse({ type: OperatorUsageResponseDto })
  async get(@Query('from') from?: string, @Query('to') to?: string, @Query('groupBy') groupBy?: string): Promise<OperatorUsageResponseDto> {
    return { rows: await this.usage.report(parseUsageWindow({ from, to, groupBy }), this.config.creditValueUsd) };
  }
}
