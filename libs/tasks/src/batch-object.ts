import type { TaskCounts } from './batch-status';
import type { BatchView } from './batch-view';

/**
 * The Batch object as clients see it: the api answers with it and webhook events carry it.
 * The api's BatchDto documents it; a spec there checks the documented fields are these.
 */
export interface BatchObject {
  id: string;
  createdAt: number;
  prompts: string[];
  model: string;
  aspectRatio: string;
  resolution: string;
  quality: string;
  background: string | null;
  countPerCombo: number;
  refMode: string;
  refImages: string[];
  total: number;
  note: string | null;
  seed: number | null;
  outputFormat: string;
  counts: TaskCounts;
  previewUrl: string | null;
  createdViaApi: boolean;
  status: string;
  done: boolean;
  creditsCharged: number;
  creditsRefunded: number;
  cancelledAt: number | null;
  /** standard or economy. */
  tier: string;
  /** Economy: Unix ms by which every task has ended (createdAt + the model's window); null for standard. */
  expiresAt: number | null;
  /** Unix ms: tasks not sent by then are cancelled and refunded; null when none. */
  deadline: number | null;
  /** Why cancelledAt is set: 'deadline', or null (a caller's cancel, or not cancelled). */
  cancelReason: string | null;
}

export function batchObject(b: BatchView): BatchObject {
  return {
    id: b.id,
    createdAt: b.createdAt.getTime(),
    prompts: b.prompts,
    model: b.model,
    aspectRatio: b.aspectRatio,
    resolution: b.resolution,
    quality: b.quality,
    background: b.background,
    countPerCombo: b.countPerCombo,
    refMode: b.refMode,
    refImages: b.refImages,
    total: b.total,
    note: b.note,
    seed: b.seed,
    outputFormat: b.outputFormat,
    counts: {
      pending: b.counts.pending,
      running: b.counts.running,
      succeeded: b.counts.succeeded,
      failed: b.counts.failed,
      cancelled: b.counts.cancelled,
      // The api's reads only: webhook events (built from the batch row) stay as they were.
      ...(b.counts.cancelling === undefined ? {} : { cancelling: b.counts.cancelling }),
    },
    previewUrl: b.previewUrl,
    createdViaApi: b.createdViaApi,
    status: b.status,
    done: b.done,
    creditsCharged: b.creditsCharged,
    creditsRefunded: b.creditsRefunded,
    cancelledAt: b.cancelledAt ? b.cancelledAt.getTime() : null,
    tier: b.tier,
    expiresAt: b.expiresAt ? b.expiresAt.getTime() : null,
    deadline: b.deadline ? b.deadline.getTime() : null,
    cancelReason: b.cancelReason,
  };
}
