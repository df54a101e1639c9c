import { Body, Controller, Get, Param, Patch, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import { AdminGuard } from './admin.guard';
import { UpdatePlanRequestDto } from './admin.request.dto';

/** Operator API: the plans and their limits. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/plans')
export class AdminPlansController {
  constructor(private readonly accounts: AccountsService) {}

  @Get()
  async listPlans() {
    return { plans: await this.accounts.listPlans() };
  }

  @Patch(':key')
  @ApiOperation({ summary: 'Edit a plan (limits, rate limit per key per minute)' })
  async updatePlan(@Param('key') key: string, @Body() body: UpdatePlanRequestDto) {
    return { plan: await this.accounts.updatePlan(key, body) };
  }
}
