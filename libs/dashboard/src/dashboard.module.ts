import { Module } from '@nestjs/common';
import { AccountsModule } from '@app/accounts';
import { SessionsService } from './sessions.service';
import { UsageService } from './usage.service';

/** Account holders' side of Kiln: sessions and read views of usage and the ledger. */
@Module({
  imports: [AccountsModule],
  providers: [SessionsService, UsageService],
  exports: [SessionsService, UsageService],
})
export class DashboardModule {}
