import { ApiProperty } from '@nestjs/swagger';
import { type BatchEstimate, type BatchTask } from '@app/batches';
import { type RememberedCreation } from '@app/idempotency';
import { QUALITIES } from '@app/batches';
import {
  BATCH_CANCEL_REASONS,
  BATCH_STATUSES,
  BATCH_TIERS,
  type BatchTier,
  REF_MODES,
  TASK_ERROR_CODES,
  TASK_STATUSES,
} from '@app/database';
import { RESOLUTIONS } from '@app/geometry';
import { batchObject, type BatchView, taskObject } from '@app/tasks';
import { ErrorObjectDto } from '../../common/error.response.dto';

/** docs/api.md#counts-object: `pending` includes queued tasks. */
export class CountsDto {
  @ApiProperty({ type: 'integer', description: 'pending and queued tasks' }) pending: number;
  @ApiProperty({ type: 'integer' }) running: number;
  @ApiProperty({ type: 'integer' }) succeeded: number;
  @ApiProperty({ type: 'integer' }) failed: number;
  @ApiProperty({
    type: 'integer',
    description: 'Tasks cancelled (refunded): before they were sent, or confirmed not run by their upstream',
  })
  cancelled: number;
  @ApiProperty({
    type: 'integer',
    description:
      'Of the running tasks, those whose cancel was asked of their upstream and not yet confirmed (not counted apart: counts still sum to total); absent from webhook events',
  })
  cancelling?: number;
}

/** docs/api.md#batch-object, with Kiln's added fields (status, done, credits, quality). */
export class BatchDto {
  @ApiProperty() id: string;
  @ApiProperty({ type: 'integer', description: 'Unix milliseconds' }) createdAt: number;
  @ApiProperty({ type: [String] }) prompts: string[];
  @ApiProperty() model: string;
  @ApiProperty({ example: '1:1' }) aspectRatio: string;
  @ApiProperty({ enum: RESOLUTIONS }) resolution: string;
  @ApiProperty({ enum: QUALITIES }) quality: string;
  @ApiProperty({ type: 'string', nullable: true, description: 'null = auto; else "transparent" or #RRGGBB' })
  background: string | null;
  @ApiProperty({ type: 'integer' }) countPerCombo: number;
  @ApiProperty({ enum: REF_MODES }) refMode: string;
  @ApiProperty({ type: [String] }) refImages: string[];
  @ApiProperty({ type: 'integer', description: 'Number of images (tasks)' }) total: number;
  @ApiProperty({ type: 'string', nullable: true }) note: string | null;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: "The batch's seed (task n renders with seed + n - 1); null when none was given",
    example: 42,
  })
  seed: number | null;
  @ApiProperty({ enum: ['png', 'jpeg', 'webp'], description: 'The format the images are stored and served in' }) outputFormat: string;
  @ApiProperty({ type: CountsDto }) counts: CountsDto;
  @ApiProperty({ type: 'string', nullable: true }) previewUrl: string | null;
  @ApiProperty() createdViaApi: boolean;
  @ApiProperty({ enum: BATCH_STATUSES }) status: string;
  @ApiProperty({ description: 'True once no task is pending, queued or running' }) done: boolean;
  @ApiProperty({ type: 'integer', description: 'Credits charged at creation; does not shrink on refund' })
  creditsCharged: number;
  @ApiProperty({ type: 'integer', description: 'Credits refunded for failed and cancelled tasks' }) creditsRefunded: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Unix milliseconds of the cancel, else null' })
  cancelledAt: number | null;
  @ApiProperty({ enum: BATCH_TIERS, description: 'The tier it was created on (priced and run accordingly)' }) tier: string;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description:
      "Economy: Unix milliseconds by which every task has ended (createdAt + the model's economyWindowHours); tasks not ended by then fail and are refunded. null for standard",
    example: 1795513462562,
  })
  expiresAt: number | null;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description:
      'Unix milliseconds the batch was created with as its deadline: tasks not sent to their upstream by then are cancelled and refunded. null when none',
    example: 1795513462562,
  })
  deadline: number | null;
  @ApiProperty({
    type: 'string',
    enum: BATCH_CANCEL_REASONS,
    nullable: true,
    description:
      "Why cancelledAt is set: 'deadline' when the deadline passed with tasks unsent (they were cancelled and refunded); null for a caller's cancel, or when not cancelled",
  })
  cancelReason: string | null;

  /** The libs build the object (webhook events carry the same one); this class documents it. */
  static from(b: BatchView): BatchDto {
    return batchObject(b);
  }
}

/** docs/api.md#task-object */
export class TaskDto {
  @ApiProperty() id: string;
  @ApiProperty() batchId: string;
  @ApiProperty() prompt: string;
  @ApiProperty({ enum: TASK_STATUSES }) status: string;
  @ApiProperty({ type: 'integer', description: '0 while pending/queued, 1..99 while running, 100 when succeeded' })
  progress: number;
  @ApiProperty({ type: [String], description: 'One public URL once succeeded, else empty' }) resultUrls: string[];
  @ApiProperty({ type: 'string', nullable: true, description: 'Short reason when failed' }) error: string | null;
  @ApiProperty({ type: 'integer', description: '1-based position in the batch: prompt order, then reference image, then copy', example: 1 })
  index: number;
  @ApiProperty({ type: 'integer', description: "0-based index into the batch's prompts", example: 0 }) promptIndex: number;
  @ApiProperty({ type: 'string', nullable: true, description: 'The reference URL this task pairs with under refMode "each", else null' })
  refImage: string | null;
  @ApiProperty({ type: 'integer', description: '1-based copy number within its prompt (and reference) combination', example: 1 })
  copy: number;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Pixel width of the stored image as it really is; null until succeeded' })
  width: number | null;
  @ApiProperty({ type: 'integer', nullable: true, description: 'Pixel height of the stored image; null until succeeded' })
  height: number | null;
  @ApiProperty({ type: 'string', enum: TASK_ERROR_CODES, nullable: true, description: 'Why it failed, to branch on; null unless failed' })
  errorCode: string | null;
  @ApiProperty({
    description:
      "True while its batch's cancel is asked of its upstream and not yet answered (the task is running); absent from webhook events",
  })
  cancelling?: boolean;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: 'Unix ms when a worker first took it (retries keep it); null before; absent from webhook events',
    example: 1767312000000,
  })
  startedAt?: number | null;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: 'Unix ms when it ended (succeeded, failed or cancelled); null until then; absent from webhook events',
    example: 1767312004200,
  })
  finishedAt?: number | null;

  static from(t: BatchTask): TaskDto {
    return taskObject(t);
  }
}

/** docs/api.md#creation-response */
export class CreatedBatchResponseDto {
  @ApiProperty() id: string;
  @ApiProperty({ type: 'integer' }) total: number;
  @ApiProperty({ type: 'integer' }) creditsCharged: number;
  @ApiProperty({ enum: BATCH_STATUSES, example: 'pending' }) status: string;
  @ApiProperty({ enum: BATCH_TIERS, description: 'The tier it was created on (and charged for)' }) tier: BatchTier;

  static from(b: RememberedCreation): CreatedBatchResponseDto {
    // A replay of an answer remembered before the 201 named its tier: creations of that time
    // without one were standard unless asked otherwise, so the batch itself is not read again.
    return { id: b.id, total: b.total, creditsCharged: b.creditsCharged, status: b.status, tier: b.tier ?? 'standard' };
  }
}

export class BatchListResponseDto {
  @ApiProperty({ type: [BatchDto] }) batches: BatchDto[];
  @ApiProperty({ type: 'string', nullable: true, description: 'Pass as `cursor` for the next page; null on the last page' })
  nextCursor: string | null;

  static from(page: { batches: BatchView[]; nextCursor: string | null }): BatchListResponseDto {
    return { batches: page.batches.map((b) => BatchDto.from(b)), nextCursor: page.nextCursor };
  }
}

export class BatchDetailResponseDto {
  @ApiProperty({ type: BatchDto }) batch: BatchDto;
  @ApiProperty({ type: [TaskDto], description: 'In fan-out order: prompt, then reference image, then copy' })
  tasks: TaskDto[];

  static from(d: { batch: BatchView; tasks: BatchTask[] }): BatchDetailResponseDto {
    return { batch: BatchDto.from(d.batch), tasks: d.tasks.map((t) => TaskDto.from(t)) };
  }
}

export class DailyCapEstimateDto {
  @ApiProperty({ type: 'integer', example: 500 }) cap: number;
  @ApiProperty({ type: 'integer', description: 'Credits charged through this key today (UTC), minus refunds', example: 120 }) used: number;
  @ApiProperty({ type: 'integer', example: 380 }) remaining: number;
  @ApiProperty({ type: 'integer', description: 'Unix ms of the next 00:00 UTC', example: 1767312000000 }) resetsAt: number;
}

/** POST /v1/batches/estimate: what create would charge and answer now; nothing is charged or reserved. */
export class BatchEstimateResponseDto {
  @ApiProperty({ type: 'integer', description: 'Number of images (tasks)', example: 8 }) total: number;
  @ApiProperty({ enum: BATCH_TIERS, description: "The tier priced (the request's, standard by default)" }) tier: string;
  @ApiProperty({
    type: 'integer',
    description: "Credits per image at the resolution, on the tier (economy: the model's economyCreditCost)",
    example: 5,
  })
  creditCost: number;
  @ApiProperty({ type: 'integer', description: 'total x creditCost: what create would charge', example: 40 }) creditsRequired: number;
  @ApiProperty({ type: 'integer', example: 30 }) balance: number;
  @ApiProperty({ type: DailyCapEstimateDto, nullable: true, description: "The key's daily cap; null without one (and for the dashboard)" })
  dailyCap: DailyCapEstimateDto | null;
  @ApiProperty({ description: 'True when create would succeed now', example: false }) wouldCreate: boolean;
  // The example is a refusal, not null: OpenAPI 3.0's nullable does not reach into the allOf
  // that `type: ErrorObjectDto` produces, so linters read a null example as contradicting it.
  @ApiProperty({
    type: ErrorObjectDto,
    nullable: true,
    description:
      'What create would refuse with now for the plan and the money (batch_limit_exceeded, concurrent_limit_exceeded, insufficient_credits, daily_credit_cap_exceeded), else null',
    example: { code: 'insufficient_credits', message: 'This batch costs 40 credits; the balance is 30' },
  })
  refusal: ErrorObjectDto | null;

  static from(e: BatchEstimate): BatchEstimateResponseDto {
    return { ...e };
  }
}

/** How an archive's manifest shows a batch and its tasks: the wire shapes of GET /v1/batches/{id}. */
export const ARCHIVE_JSON = { batch: (b: BatchView) => BatchDto.from(b), task: (t: BatchTask) => ({ ...TaskDto.from(t) }) };
