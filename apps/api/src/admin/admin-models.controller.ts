import { Body, Controller, Get, Inject, Param, Patch, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService, modelRouteWarnings, modelView, resolveChain, RouteHealthStore } from '@app/catalog';
import { KILN_CONFIG, KilnConfig } from '@app/config';
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
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  @Get()
  @ApiOperation({
    operationId: 'listAdminModels',
    summary:
      "Every model, enabled or not, with its provider routing, its route's health as the generators see it (routeHealth; 503 when Redis is down) and routeWarnings (a preset retiring, pairs the route cannot price or prices at no margin)",
  })
  @ApiOkResponse({ type: AdminModelListResponseDto })
  async listModels() {
    const models = await this.catalog.listAll();
    const views = models.map(modelView);
    const health = await this.routeHealth.healthOf(models);
    const routes = await this.routeHealth.routesHealthOf(views);
    return {
      models: views.map((m) => ({
        ...m,
        routeHealth: health[m.key],
        routesHealth: routes[m.key],
        routeWarnings: modelRouteWarnings(m, this.config.creditValueUsd),
      })),
    };
  }

  @Post()
  @ApiOperation({
    operationId: 'createAdminModel',
    summary: 'Create a model (optionally fromPreset); offered to clients at once when enabled',
  })
  @ApiCreatedResponse({ type: AdminModelResponseDto })
  async createModel(@Body() body: CreateModelRequestDto) {
    await this.checkRoutesUsable(body);
    const model = await this.catalog.create(body);
    return { model: modelView(model), routeWarnings: modelRouteWarnings(model, this.config.creditValueUsd) };
  }

  @Patch(':key')
  @ApiOperation({
    operationId: 'updateAdminModel',
    summary: 'Edit names, prices, sizes, caps, supports, enabled or provider routing; applies to later batches',
  })
  @ApiOkResponse({ type: AdminModelResponseDto })
  async updateModel(@Param('key') key: string, @Body() body: UpdateModelRequestDto) {
    // A route no generator could use would fail every batch on it: refused up front.
    await this.checkRoutesUsable(body);
    const model = await this.catalog.update(key, body);
    return { model: modelView(model), routeWarnings: modelRouteWarnings(model, this.config.creditValueUsd) };
  }

  /** Each route the edit gives must be usable by every live generator (its key set there). */
  private async checkRoutesUsable(body: UpdateModelRequestDto): Promise<void> {
    if (body.provider === undefined && body.routes === undefined) return;
    const chain = resolveChain(body);
    for (const [i, route] of chain.routes.entries()) await this.routeHealth.checkRouteUsable(route, chain.fieldOf(i));
  }
}
