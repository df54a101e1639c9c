import { Module } from '@nestjs/common';
import { AccountsModule } from '@app/accounts';
import { BatchesModule } from '@app/batches';
import { BillingModule } from '@app/billing';
import { CatalogModule } from '@app/catalog';
import { KeysModule } from '@app/keys';
import { PaymentsModule } from '@app/payments';
import { SessionsModule } from '@app/sessions';
import { UploadsModule } from '@app/uploads';
import { ApiAuthModule } from '../auth/api-auth.module';
import { DashboardAccountController } from './dashboard-account.controller';
import { DashboardAuthController } from './dashboard-auth.controller';
import { DashboardBatchesController } from './dashboard-batches.controller';
import { DashboardCreditsController } from './dashboard-credits.controller';
import { DashboardKeysController } from './dashboard-keys.controller';
import { DashboardLedgerController } from './dashboard-ledger.controller';
import { DashboardModelsController } from './dashboard-models.controller';
import { DashboardUploadsController } from './dashboard-uploads.controller';
import { DashboardUsageController } from './dashboard-usage.controller';
import { DashboardWebhooksController } from './dashboard-webhooks.controller';
import { DASHBOARD_AUTH_LIMITS, DEFAULT_DASHBOARD_AUTH_LIMITS, LoginThrottle } from './login-throttle.service';
import { SessionGuard } from './session.guard';

/** The /v1/dashboard routes (docs/dashboard.md), for account holders signed in with a session. */
@Module({
  imports: [
    SessionsModule,
    AccountsModule,
    KeysModule,
    BatchesModule,
    BillingModule,
    CatalogModule,
    UploadsModule,
    PaymentsModule,
    ApiAuthModule,
  ],
  controllers: [
    DashboardAuthController,
    DashboardAccountController,
    DashboardKeysController,
    DashboardUsageController,
    DashboardLedgerController,
    DashboardCreditsController,
    DashboardBatchesController,
    DashboardWebhooksController,
    DashboardModelsController,
    DashboardUploadsController,
  ],
  providers: [SessionGuard, LoginThrottle, { provide: DASHBOARD_AUTH_LIMITS, useValue: DEFAULT_DASHBOARD_AUTH_LIMITS }],
})
export class DashboardApiModule {}
