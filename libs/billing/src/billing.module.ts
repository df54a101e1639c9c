import { Module } from '@nestjs/common';
import { BillingService } from './billing.service';
import { OperatorUsageService } from './operator-usage.service';
import { UsageService } from './usage.service';

/**
 * Balances and the ledger: BillingService writes them, UsageService reads them for the account
 * holder, OperatorUsageService for the operator (with upstream cost and margin).
 */
@Module({ providers: [BillingService, UsageService, OperatorUsageService], exports: [BillingService, UsageService, OperatorUsageService] })
export class BillingModule {}
