import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { BatchChangePublisher } from './batch-changes';
import { BatchCancellation } from './task-cancellation';
import { TaskDispatchService } from './task-dispatch.service';
import { TaskStateStore } from './task-state.store';
import { UpstreamBatchStore } from './upstream-batch.store';
import { UpstreamWaitStore } from './upstream-wait.store';

/**
 * The task row and its queue: dispatch (pending <-> queued, the jobs) and the fenced state
 * store. Needs the task queue, which `KilnQueueModule.forRoot()` (imported once by each app)
 * provides globally, and the database module.
 */
@Module({
  imports: [BillingModule],
  providers: [TaskDispatchService, TaskStateStore, UpstreamWaitStore, UpstreamBatchStore, BatchCancellation, BatchChangePublisher],
  exports: [TaskDispatchService, TaskStateStore, UpstreamWaitStore, UpstreamBatchStore, BatchCancellation, BatchChangePublisher],
})
export class TasksModule {}
