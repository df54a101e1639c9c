import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { CatalogModule } from '@app/catalog';
import { MetricsModule } from '@app/metrics';
import { TasksModule } from '@app/tasks';
import { UploadsModule } from '@app/uploads';
import { BatchesService } from './batches.service';
import { ContentPolicyService } from './content-policy';

/** Batch creation, listing and polling. Needs the database module and the task queue (see TasksModule). */
@Module({
  imports: [BillingModule, CatalogModule, UploadsModule, TasksModule, MetricsModule],
  providers: [BatchesService, ContentPolicyService],
  exports: [BatchesService, ContentPolicyService],
})
export class BatchesModule {}
