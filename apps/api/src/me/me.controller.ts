import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import { BillingService, creditCapPerDayOf, nextUtcMidnight } from '@app/billing';
import { AuthenticatedKey } from '@app/keys';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { KeyBudgetDto } from '../common/key.response.dto';
import { MeResponseDto } from './me.response.dto';

@ApiTags('Public API')
@Controller('me')
export class MeController {
  constructor(
    private readonly accounts: AccountsService,
    private readonly billing: BillingService,
  ) {}

  @Get()
  @ApiKeyAuth('account:read')
  @ApiOperation({ operationId: 'getMe', summary: "Account, credit balance, plan limits and this key's daily usage" })
  @ApiOkResponse({ type: MeResponseDto })
  async me(@CurrentKey() auth: AuthenticatedKey): Promise<MeResponseDto> {
    const [{ account, plan, activeBatches, activeEconomyBatches }, usedToday, budgetSpent] = await Promise.all([
      this.accounts.view(auth.account.id),
      this.billing.creditsUsedToday(auth.key.id),
      this.billing.budgetSpentByKey([auth.key]),
    ]);
    return {
      user: {
        id: account.id,
        email: account.email,
        plan: account.planKey,
        status: account.status,
        createdAt: account.createdAt.getTime(),
      },
      credits: { balance: account.balance, lowCreditsThreshold: account.lowCreditsThreshold },
      limits: {
        maxImagesPerBatch: plan.maxImagesPerBatch,
        maxConcurrentBatches: plan.maxConcurrentBatches,
        activeBatches,
        maxConcurrentEconomyBatches: plan.maxConcurrentEconomyBatches,
        activeEconomyBatches,
      },
      key: {
        id: auth.key.id,
        scopes: auth.key.scopes,
        creditCapPerDay: creditCapPerDayOf(auth.key),
        creditsUsedToday: usedToday,
        capResetsAt: nextUtcMidnight(),
        budget: KeyBudgetDto.of(auth.key, budgetSpent.get(auth.key.id) ?? 0),
        models: auth.key.models,
      },
    };
  }
}
