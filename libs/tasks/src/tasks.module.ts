import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { BatchChangePublisher } from './batch-changes';
import { BatchDeadlines } from './batch-deadline';
import { BatchCancellation } from './task-cancellation';
import { TaskDispatchService } from './task-dispatch.service';
import { TaskStateStore } from './task-state.store';
import { UpstreamBatchStore } from './upstream-batch.store';
import { UpstreamCancelSignal, UpstreamCancelStore } from './upstream-cancel.store';
import { UpstreamWaitStore } from './upstream-wait.store';
import { SubmitIntentStore } from './submit-intent.store';

/**
 * The task row and its queue: dispatch (pending <-> queued, the jobs) and the fenced state
 * store. Needs the task queue, which `KilnQueueModule.forRoot()` (imported once by each app)
 * provides globally, and the database module.
 */
@Module({
  imports: [BillingModule],
  providers: [
    TaskDispatchService,
    TaskStateStore,
    UpstreamWaitStore,
    SubmitIntentStore,
    UpstreamBatchStore,
    UpstreamCancelStore,
    UpstreamCancelSignal,
    BatchCancellation,
    BatchDeadlines,
    BatchChangePublisher,
  ],
  exports: [
    TaskDispatchService,
    TaskStateStore,
    UpstreamWaitStore,
    SubmitIntentStore,
    UpstreamBatchStore,
    UpstreamCancelStore,
    UpstreamCancelSignal,
    BatchCancellation,
    BatchDeadlines,
    BatchChangePublisher,
  ],
})
export class TasksModule {}
