import { Controller, Get, Headers, Inject, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiProduces, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { OperatorUsageService, parseUsageWindow, USAGE_GROUPINGS, usageReportCsv } from '@app/billing';
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
    summary: 'Images, credits, upstream cost, revenue and margin per UTC day, model, account, route or API key',
    description:
      'Credits are the ledger rows written in the window (a refund counts on the day it happened); images, failures and ' +
      'upstream cost are the tasks that ended in it (unpricedImages: those no price covered, not in upstreamCostUsd). ' +
      'revenueUsd = net credits x CREDIT_VALUE_USD. With `Accept: text/csv` the same rows come as CSV.',
  })
  @ApiQuery({ name: 'from', required: false, description: 'First UTC day, YYYY-MM-DD (default: 29 days before to)' })
  @ApiQuery({ name: 'to', required: false, description: 'Last UTC day, YYYY-MM-DD, included (default: today); at most 366 days' })
  @ApiQuery({ name: 'groupBy', required: false, enum: USAGE_GROUPINGS, description: 'default day' })
  @ApiProduces('application/json', 'text/csv')
  @ApiOkResponse({ type: OperatorUsageResponseDto })
  async get(
    @Res({ passthrough: true }) res: Response,
    @Headers('accept') accept?: string,
    @Query('from') from?: string,
    @Query('to') to?: string,
    @Query('groupBy') groupBy?: string,
  ): Promise<OperatorUsageResponseDto | string> {
    const window = parseUsageWindow({ from, to, groupBy });
    const rows = await this.usage.report(window, this.config.creditValueUsd);
    if (!/\btext\/csv\b/i.test(accept ?? '')) return { rows };
    res.type('text/csv; charset=utf-8');
    res.setHeader('Content-Disposition', `attachment; filename="kiln-usage-${window.from}-${window.to}-by-${window.groupBy}.csv"`);
    return usageReportCsv(rows, window.groupBy);
  }
}
