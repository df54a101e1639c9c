import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { CatalogModule } from '@app/catalog';
import { UploadsModule } from '@app/uploads';
import { BatchesService } from './batches.service';
import { ContentPolicy } from './content-policy';
import { TaskDispatchService } from './task-dispatch.service';

/**
 * Batch creation, listing and dispatch. Needs the task queue, which `KilnQueueModule.forRoot()`
 * (imported once by each app) provides globally, and the database module.
 */
@Module({
  imports: [BillingModule, CatalogModule, UploadsModule],
  providers: [BatchesService, TaskDispatchService, ContentPolicy],
  exports: [BatchesService, TaskDispatchService, ContentPolicy],
})
export class BatchesModule {}
