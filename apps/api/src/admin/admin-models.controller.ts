import { Body, Controller, Get, Param, Patch, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService } from '@app/catalog';
import { AdminGuard } from './admin.guard';
import { AdminModelListResponseDto, AdminModelResponseDto } from './admin.response.dto';
import { UpdateModelRequestDto } from './admin.request.dto';

/** Operator API: the model catalog, enabled or not, with its provider routing. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/models')
export class AdminModelsController {
  constructor(private readonly catalog: CatalogService) {}

  @Get()
  @ApiOperation({ operationId: 'listAdminModels', summary: 'Every model, enabled or not, with its provider routing' })
  @ApiOkResponse({ type: AdminModelListResponseDto })
  async listModels() {
    return { models: await this.catalog.listAll() };
  }

  @Patch(':key')
  @ApiOperation({ operationId: 'updateAdminModel', summary: 'Edit prices, sizes, caps, enabled or provider routing; applies to later batches' })
  @ApiOkResponse({ type: AdminModelResponseDto })
  async updateModel(@Param('key') key: string, @Body() body: UpdateModelRequestDto) {
    return { model: await this.catalog.update(key, body) };
  }
}
