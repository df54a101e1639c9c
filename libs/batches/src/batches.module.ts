import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { CatalogModule } from '@app/catalog';
import { MetricsModule } from '@app/metrics';
import { TasksModule } from '@app/tasks';
import { UploadsModule } from '@app/uploads';
import { BatchArchiveService } from './batch-archive';
import { BatchPolling } from './batch-polling';
import { BatchEvents } from './batch-events';
import { BatchWatcher } from './batch-watcher';
import { BatchesService } from './batches.service';
import { ContentPolicyService } from './content-policy';
import { OpenAiImagesService } from './openai-images';
import { TaskFileService } from './task-file';

/** Batch creation, estimates, listing, polling and archives. Needs the database module and the task queue (see TasksModule). */
@Module({
  imports: [BillingModule, CatalogModule, UploadsModule, TasksModule, MetricsModule],
  providers: [
    BatchesService,
    BatchArchiveService,
    ContentPolicyService,
    BatchPolling,
    BatchEvents,
    BatchWatcher,
    OpenAiImagesService,
    TaskFileService,
  ],
  exports: [
    BatchesService,
    BatchArchiveService,
    ContentPolicyService,
    BatchPolling,
    BatchEvents,
    BatchWatcher,
    OpenAiImagesService,
    TaskFileService,
  ],
})
export class BatchesModule {}
