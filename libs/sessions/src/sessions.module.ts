import { Module } from '@nestjs/common';
import { AccountsModule } from '@app/accounts';
import { SessionsService } from './sessions.service';

/** Account holders' sessions: signup, login, logout and the session a dashboard request carries. */
@Module({
  imports: [AccountsModule],
  providers: [SessionsService],
  exports: [SessionsService],
})
export class SessionsModule {}
