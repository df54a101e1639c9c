import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { providerCatalog } from '@app/providers';
import { AdminGuard } from './admin.guard';
import { ProvidersResponseDto } from './admin.response.dto';

/** Operator API: the route types Kiln can call and the presets of known upstream models. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/providers')
export class AdminProvidersController {
  @Get()
  @ApiOperation({
    operationId: 'listAdminProviders',
    summary: 'Route types with their settings, and presets with list price and retirement date, for PATCH/POST /v1/admin/models',
  })
  @ApiOkResponse({ type: ProvidersResponseDto })
  listProviders() {
    return providerCatalog();
  }
}
