import { Body, Controller, Get, Inject, Patch } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import type { AuthenticatedSession } from '@app/sessions';
import { AccountDto } from '../common/account.response.dto';
import { ErrorResponseDto } from '../common/error.response.dto';
import { UpdateDashboardAccountRequestDto } from './dto/dashboard.request.dto';
import { DashboardAccountResponseDto } from './dto/dashboard.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

@ApiTags('Dashboard')
@SessionAuth()
@Controller('dashboard/account')
export class DashboardAccountController {
  constructor(
    private readonly accounts: AccountsService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  @Get()
  @ApiOperation({ operationId: 'getDashboardAccount', summary: 'The account, its plan, balance and limits' })
  @ApiOkResponse({ type: DashboardAccountResponseDto })
  async account(@CurrentSession() auth: AuthenticatedSession): Promise<DashboardAccountResponseDto> {
    return this.answer(auth.account.id);
  }

  @Patch()
  @ApiOperation({
    operationId: 'updateDashboardAccount',
    summary: 'Set or clear (null) the low-credits alert line (credits.low webhook event)',
  })
  @ApiOkResponse({ type: DashboardAccountResponseDto })
  @ApiResponse({ status: 400, description: 'invalid_request', type: ErrorResponseDto })
  async update(
    @CurrentSession() auth: AuthenticatedSession,
    @Body() body: UpdateDashboardAccountRequestDto,
  ): Promise<DashboardAccountResponseDto> {
    await this.accounts.setLowCreditsThreshold(auth.account.id, body.lowCreditsThreshold);
    return this.answer(auth.account.id);
  }

  private async answer(accountId: string): Promise<DashboardAccountResponseDto> {
    const { account, plan, activeBatches, activeEconomyBatches } = await this.accounts.view(accountId);
    return {
      account: { ...AccountDto.from(account), lowCreditsThreshold: account.lowCreditsThreshold },
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
      purchasesEnabled: this.config.stripe !== null,
    };
  }
}
