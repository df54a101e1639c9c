import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { CatalogModule } from '@app/catalog';
import { TasksModule } from '@app/tasks';
import { UploadsModule } from '@app/uploads';
import { BatchArchiveService } from './batch-archive';
import { BatchesService } from './batches.service';
import { ContentPolicy } from './content-policy';

/** Batch creation, estimates, listing, polling and archives. Needs the database module and the task queue (see TasksModule). */
@Module({
  imports: [BillingModule, CatalogModule, UploadsModule, TasksModule],
  providers: [BatchesService, BatchArchiveService, ContentPolicy],
  exports: [BatchesService, BatchArchiveService, ContentPolicy],
})
export class BatchesModule {}
