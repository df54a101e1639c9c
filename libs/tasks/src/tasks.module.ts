import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { TaskDispatchService } from './task-dispatch.service';
import { TaskStateStore } from './task-state.store';

/**
 * The task row and its queue: dispatch (pending <-> queued, the jobs) and the fenced state
 * store. Needs the task queue, which `KilnQueueModule.forRoot()` (imported once by each app)
 * provides globally, and the database module.
 */
@Module({
  imports: [BillingModule],
  providers: [TaskDispatchService, TaskStateStore],
  exports: [TaskDispatchService, TaskStateStore],
})
export class TasksModule {}
