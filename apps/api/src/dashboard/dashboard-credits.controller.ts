import { Body, Controller, Get, HttpCode, Inject, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { CheckoutService, CreditPacksService, paymentsDisabled } from '@app/payments';
import { AuthenticatedSession } from '@app/sessions';
import { CreditPackDto, CreditPackListResponseDto } from '../common/credit-pack.dto';
import { ErrorResponseDto } from '../common/error.response.dto';
import { CheckoutRequestDto, CheckoutResponseDto } from './dto/dashboard-credits.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

const DISABLED = { status: 404, description: 'not_found (details.reason payments_disabled: no STRIPE_SECRET_KEY)', type: ErrorResponseDto };

/** Buying credits (docs/billing.md): the packs on sale and a Checkout Session for one. */
@ApiTags('Dashboard')
@SessionAuth()
@Controller('dashboard')
export class DashboardCreditsController {
  constructor(
    private readonly packs: CreditPacksService,
    private readonly checkout: CheckoutService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  @Get('credit-packs')
  @ApiOperation({ operationId: 'listDashboardCreditPacks', summary: 'The credit packs on sale, cheapest first' })
  @ApiOkResponse({ type: CreditPackListResponseDto })
  @ApiResponse(DISABLED)
  async list(): Promise<CreditPackListResponseDto> {
    if (!this.config.stripe) throw paymentsDisabled();
    return { packs: (await this.packs.listActive()).map((p) => CreditPackDto.from(p)) };
  }

  @Post('checkout')
  @HttpCode(200)
  @ApiOperation({
    operationId: 'createDashboardCheckout',
    summary: 'Start buying a pack: the URL of a Stripe Checkout page; the credits arrive once Stripe reports the payment',
  })
  @ApiOkResponse({ type: CheckoutResponseDto })
  @ApiResponse({ status: 400, description: 'invalid_request', type: ErrorResponseDto })
  @ApiResponse({ ...DISABLED, description: `${DISABLED.description}; not_found (no such pack on sale)` })
  @ApiResponse({
    status: 503,
    description: 'service_unavailable (Stripe refused or did not answer); honour Retry-After',
    type: ErrorResponseDto,
  })
  async start(@CurrentSession() auth: AuthenticatedSession, @Body() body: CheckoutRequestDto): Promise<CheckoutResponseDto> {
    const { url, sessionId } = await this.checkout.startCheckout({ accountId: auth.account.id, email: auth.account.email }, body.packId);
    return { url, sessionId };
  }
}
