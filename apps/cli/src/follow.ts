import { BatchDetail, Kiln, Task, WaitOptions } from '@app/sdk';

/**
 * Waits for a batch to be done by following its progress stream (GET /v1/batches/{id}/events):
 * progress arrives the moment it happens, over one connection. When the stream is refused (a
 * Kiln from before it answers 404) or fails, it falls back to long polling (kiln.batches.wait),
 * which also reports a real refusal (no such batch, a revoked key) as the error it is.
 * Resolves with the batch's full detail, as wait() does.
 */
export async function waitForBatch(kiln: Kiln, id: string, options: WaitOptions = {}): Promise<BatchDetail> {
  const tasks = new Map<string, Task>();
  try {
    for await (const e of kiln.batches.events(id, { signal: options.signal })) {
      if (e.type === 'task') {
        tasks.set(e.task.id, e.task);
        continue;
      }
      options.onProgress?.({ batch: e.batch, tasks: [...tasks.values()] });
      if (e.batch.done) return await kiln.batches.get(id, { signal: options.signal });
    }
  } catch (err) {
    if (options.signal?.aborted) throw err;
  }
  return kiln.batches.wait(id, options);
}
