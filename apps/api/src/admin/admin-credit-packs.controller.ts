import { Body, Controller, Delete, Get, Param, Patch, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CreditPacksService } from '@app/payments';
import { ErrorResponseDto } from '../common/error.response.dto';
import {
  CreateCreditPackRequestDto,
  CreditPackDto,
  CreditPackListResponseDto,
  CreditPackResponseDto,
  UpdateCreditPackRequestDto,
} from '../common/credit-pack.dto';
import { AdminGuard } from './admin.guard';

/**
 * Operator API: the credit packs account holders buy (docs/billing.md). Available whether or
 * not Stripe is configured, so packs can be ready before selling is turned on.
 */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/credit-packs')
export class AdminCreditPacksController {
  constructor(private readonly packs: CreditPacksService) {}

  @Get()
  @ApiOperation({ operationId: 'listAdminCreditPacks', summary: 'Every credit pack, archived ones included' })
  @ApiOkResponse({ type: CreditPackListResponseDto })
  async list(): Promise<CreditPackListResponseDto> {
    return { packs: (await this.packs.list()).map((p) => CreditPackDto.from(p)) };
  }

  @Post()
  @ApiOperation({ operationId: 'createAdminCreditPack', summary: 'Define a credit pack: credits for a price' })
  @ApiCreatedResponse({ type: CreditPackResponseDto })
  async create(@Body() body: CreateCreditPackRequestDto): Promise<CreditPackResponseDto> {
    return { pack: CreditPackDto.from(await this.packs.create(body)) };
  }

  @Patch(':id')
  @ApiOperation({ operationId: 'updateAdminCreditPack', summary: 'Edit a pack; purchases already paid keep what they bought' })
  @ApiOkResponse({ type: CreditPackResponseDto })
  @ApiNotFoundResponse({ description: 'not_found', type: ErrorResponseDto })
  async update(@Param('id') id: string, @Body() body: UpdateCreditPackRequestDto): Promise<CreditPackResponseDto> {
    return { pack: CreditPackDto.from(await this.packs.update(id, body)) };
  }

  @Delete(':id')
  @ApiOperation({ operationId: 'archiveAdminCreditPack', summary: 'Take a pack off sale (archived, never erased: purchases point at it)' })
  @ApiOkResponse({ type: CreditPackResponseDto })
  @ApiNotFoundResponse({ description: 'not_found', type: ErrorResponseDto })
  async archive(@Param('id') id: string): Promise<CreditPackResponseDto> {
    return { pack: CreditPackDto.from(await this.packs.archive(id)) };
  }
}
