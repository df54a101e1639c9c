import { Module } from '@nestjs/common';
import { BillingService } from './billing.service';
import { UsageService } from './usage.service';

/** Balances and the ledger: BillingService writes them, UsageService reads them for the account holder. */
@Module({ providers: [BillingService, UsageService], exports: [BillingService, UsageService] })
export class BillingModule {}
