import { Body, Controller, Get, Param, Patch, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService, RouteHealthStore } from '@app/catalog';
import { AdminGuard } from './admin.guard';
import { AdminModelListResponseDto, AdminModelResponseDto } from './admin.response.dto';
import { UpdateModelRequestDto } from './admin.request.dto';

/** Operator API: the model catalog, enabled or not, with its provider routing. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/models')
export class AdminModelsController {
  constructor(
    private readonly catalog: CatalogService,
    private readonly routeHealth: RouteHealthStore,
  ) {}

  @Get()
  @ApiOperation({
    operationId: 'listAdminModels',
    summary: "Every model, enabled or not, with its provider routing and its route's health as the generators see it (routeHealth; 503 when Redis is down)",
  })
  @ApiOkResponse({ type: AdminModelListResponseDto })
  async listModels() {
    const models = await this.catalog.listAll();
    const health = await this.routeHealth.healthOf(models);
    return { models: models.map((m) => ({ ...m, routeHealth: health[m.key] })) };
  }

  @Patch(':key')
  @ApiOperation({ operationId: 'updateAdminModel', summary: 'Edit prices, sizes, caps, enabled or provider routing; applies to later batches' })
  @ApiOkResponse({ type: AdminModelResponseDto })
  async updateModel(@Param('key') key: string, @Body() body: UpdateModelRequestDto) {
    // A route no generator could use would fail every batch on it: refused up front.
    if (body.provider) await this.routeHealth.checkRouteUsable(body.provider);
    return { model: await this.catalog.update(key, body) };
  }
}
