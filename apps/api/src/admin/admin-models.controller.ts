import { Body, Controller, Get, Param, Patch, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService } from '@app/catalog';
import { AdminGuard } from './admin.guard';
import { UpdateModelRequestDto } from './admin.request.dto';

/** Operator API: the model catalog, enabled or not, with its provider routing. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/models')
export class AdminModelsController {
  constructor(private readonly catalog: CatalogService) {}

  @Get()
  @ApiOperation({ summary: 'Every model, enabled or not, with its provider routing' })
  async listModels() {
    return { models: await this.catalog.listAll() };
  }

  @Patch(':key')
  @ApiOperation({ summary: 'Edit prices, sizes, caps, enabled or provider routing; applies to later batches' })
  async updateModel(@Param('key') key: string, @Body() body: UpdateModelRequestDto) {
    return { model: await this.catalog.update(key, body) };
  }
}
