import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CatalogService } from '@app/catalog';
import { ApiKeyAuth } from '../auth/auth.decorators';
import { CatalogResponseDto } from './models.response.dto';

@ApiTags('Public API')
@Controller('models')
export class ModelsController {
  constructor(private readonly catalog: CatalogService) {}

  @Get()
  @ApiKeyAuth('models:read')
  @ApiOperation({ operationId: 'listModels', summary: 'Models with their prices and legal aspect-ratio x resolution pairs' })
  @ApiOkResponse({ type: CatalogResponseDto })
  async list(): Promise<CatalogResponseDto> {
    return CatalogResponseDto.from(await this.catalog.listEnabled());
  }
}
