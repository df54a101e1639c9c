import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService } from '@app/catalog';
import { CatalogResponseDto } from '../models/models.response.dto';
import { SessionAuth } from './session.decorators';

/**
 * The model catalog for a signed-in holder, as GET /v1/models: the new-batch page needs it,
 * and a holder on the free plan has no key that could read /v1/models.
 */
@ApiTags('Dashboard')
@SessionAuth()
@Controller('dashboard/models')
export class DashboardModelsController {
  constructor(private readonly catalog: CatalogService) {}

  @Get()
  @ApiOperation({
    operationId: 'listDashboardModels',
    summary: 'Models with their prices and legal aspect-ratio x resolution pairs, as GET /v1/models',
  })
  @ApiOkResponse({ type: CatalogResponseDto })
  async list(): Promise<CatalogResponseDto> {
    return CatalogResponseDto.from(await this.catalog.listEnabled());
  }
}
