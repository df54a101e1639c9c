import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { UsageService } from '@app/billing';
import { parseLimit } from '@app/database';
import { AuthenticatedSession } from '@app/sessions';
import { ErrorResponseDto } from '../common/error.response.dto';
import { LedgerQueryDto } from './dto/dashboard.request.dto';
import { LedgerEntryDto, LedgerResponseDto } from './dto/dashboard.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

@ApiTags('Dashboard')
@SessionAuth()
@ApiResponse({ status: 400, description: 'invalid_request (limit or cursor)', type: ErrorResponseDto })
@Controller('dashboard/ledger')
export class DashboardLedgerController {
  constructor(private readonly usage: UsageService) {}

  @Get()
  @ApiOperation({ operationId: 'listDashboardLedger', summary: 'The credit ledger, newest first: every change of balance and why' })
  @ApiOkResponse({ type: LedgerResponseDto })
  async ledger(@CurrentSession() auth: AuthenticatedSession, @Query() q: LedgerQueryDto): Promise<LedgerResponseDto> {
    const page = await this.usage.ledger(auth.account.id, parseLimit(q.limit), q.cursor);
    return { entries: page.entries.map((e) => LedgerEntryDto.from(e)), nextCursor: page.nextCursor };
  }
}
