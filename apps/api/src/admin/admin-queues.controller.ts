import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { TaskDispatchService } from '@app/tasks';
import { AdminGuard } from './admin.guard';
import { QueuesResponseDto } from './admin.response.dto';

/** Operator API: the task queue as it stands. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/queues')
export class AdminQueuesController {
  constructor(private readonly dispatch: TaskDispatchService) {}

  @Get()
  @ApiOperation({
    operationId: 'getAdminQueues',
    summary: 'Waiting, active, delayed and failed jobs per queue, and the tasks pending in PostgreSQL',
  })
  @ApiOkResponse({ type: QueuesResponseDto })
  async queues() {
    return { queues: [await this.dispatch.queueStats()] };
  }
}
