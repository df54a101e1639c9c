import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { AccountsService } from './accounts.service';

@Module({ imports: [BillingModule], providers: [AccountsService], exports: [AccountsService] })
export class AccountsModule {}
