import { Body, Controller, Get, Param, Patch, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import { AdminGuard } from './admin.guard';
import { PlanListResponseDto, PlanResponseDto } from './admin.response.dto';
import { UpdatePlanRequestDto } from './admin.request.dto';

/** Operator API: the plans and their limits. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/plans')
export class AdminPlansController {
  constructor(private readonly accounts: AccountsService) {}

  @Get()
  @ApiOperation({ operationId: 'listAdminPlans', summary: 'Every plan with its limits' })
  @ApiOkResponse({ type: PlanListResponseDto })
  async listPlans() {
    return { plans: await this.accounts.listPlans() };
  }

  @Patch(':key')
  @ApiOperation({ operationId: 'updateAdminPlan', summary: 'Edit a plan (limits, rate limit per key per minute)' })
  @ApiOkResponse({ type: PlanResponseDto })
  async updatePlan(@Param('key') key: string, @Body() body: UpdatePlanRequestDto) {
    return { plan: await this.accounts.updatePlan(key, body) };
  }
}
