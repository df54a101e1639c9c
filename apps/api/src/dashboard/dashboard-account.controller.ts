import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import type { AuthenticatedSession } from '@app/sessions';
import { AccountDto } from '../common/account.response.dto';
import { DashboardAccountResponseDto } from './dto/dashboard.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

@ApiTags('Dashboard')
@SessionAuth()
@Controller('dashboard/account')
export class DashboardAccountController {
  constructor(private readonly accounts: AccountsService) {}

  @Get()
  @ApiOperation({ operationId: 'getDashboardAccount', summary: 'The account, its plan, balance and limits' })
  @ApiOkResponse({ type: DashboardAccountResponseDto })
  async account(@CurrentSession() auth: AuthenticatedSession): Promise<DashboardAccountResponseDto> {
    const { account, plan, activeBatches, activeEconomyBatches } = await this.accounts.view(auth.account.id);
    return {
      account: AccountDto.from(account),
      limits: {
        maxImagesPerBatch: plan.maxImagesPerBatch,
        maxConcurrentBatches: plan.maxConcurrentBatches,
        activeBatches,
        maxConcurrentEconomyBatches: plan.maxConcurrentEconomyBatches,
        activeEconomyBatches,
        maxKeys: plan.maxKeys,
        apiAccess: plan.apiAccess,
        requestsPerMinute: plan.requestsPerMinute,
      },
    };
  }
}
