import { Controller, Get, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { KilnMetrics } from '@app/metrics';
import { AdminGuard } from '../admin/admin.guard';

/**
 * Prometheus metrics, behind the admin token like the rest of the operator API (and absent,
 * 404, when no ADMIN_TOKEN is set): a scraper sends `Authorization: Bearer <ADMIN_TOKEN>`.
 */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: KilnMetrics) {}

  @Get()
  @ApiOperation({
    operationId: 'getMetrics',
    summary: "The api's metrics in Prometheus' text format (see the README's Operations section)",
  })
  @ApiProduces('text/plain')
  @ApiOkResponse({ description: 'Prometheus text exposition format 0.0.4', schema: { type: 'string', example: 'kiln_tasks_pending 0\n' } })
  async scrape(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.metrics.render();
    res.setHeader('Content-Type', contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.send(body);
  }
}
