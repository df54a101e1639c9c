import { Body, Controller, Get, Param, Patch, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService, resolveRoute, RouteHealthStore } from '@app/catalog';
import { routeWarnings } from '@app/providers';
import { AdminGuard } from './admin.guard';
import { AdminModelListResponseDto, AdminModelResponseDto } from './admin.response.dto';
import { CreateModelRequestDto, UpdateModelRequestDto } from './admin.request.dto';

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
    summary:
      "Every model, enabled or not, with its provider routing, its route's health as the generators see it (routeHealth; 503 when Redis is down) and routeWarnings (a preset retiring)",
  })
  @ApiOkResponse({ type: AdminModelListResponseDto })
  async listModels() {
    const models = await this.catalog.listAll();
    const health = await this.routeHealth.healthOf(models);
    return { models: models.map((m) => ({ ...m, routeHealth: health[m.key], routeWarnings: routeWarnings(m.provider) })) };
  }

  @Post()
  @ApiOperation({ operationId: 'createAdminModel', summary: 'Create a model (optionally fromPreset); offered to clients at once when enabled' })
  @ApiCreatedResponse({ type: AdminModelResponseDto })
  async createModel(@Body() body: CreateModelRequestDto) {
    if (body.provider) await this.routeHealth.checkRouteUsable(resolveRoute(body.provider));
    return { model: await this.catalog.create(body) };
  }

  @Patch(':key')
  @ApiOperation({
    operationId: 'updateAdminModel',
    summary: 'Edit names, prices, sizes, caps, supports, enabled or provider routing; applies to later batches',
  })
  @ApiOkResponse({ type: AdminModelResponseDto })
  async updateModel(@Param('key') key: string, @Body() body: UpdateModelRequestDto) {
    // A route no generator could use would fail every batch on it: refused up front.
    if (body.provider) await this.routeHealth.checkRouteUsable(resolveRoute(body.provider));
    return { model: await this.catalog.update(key, body) };
  }
}
