import { ProviderError, UpstreamBatchApi, UpstreamBatchLine, UpstreamBatchRef, UpstreamBatchResult } from '@app/providers';
import type { FakeBatchUpstream } from './fake-batch-upstream';

/*
 * What the batch clients' specs (openai.batch.spec.ts, gemini.batch.spec.ts) do the same way
 * against their fakes (fake-batch-upstream.ts). Test code only; assertions stay in the specs.
 */

export async function collect(results: AsyncIterable<UpstreamBatchResult>): Promise<UpstreamBatchResult[]> {
  const out: UpstreamBatchResult[] = [];
  for await (const r of results) out.push(r);
  return out;
}

/** Steps 1 and 2: the lines encoded and uploaded, and a batch created over them for the group. */
export async function submit(client: UpstreamBatchApi, lines: UpstreamBatchLine[], group: string): Promise<UpstreamBatchRef> {
  const { inputId } = await client.uploadInput(
    lines.map((l) => client.encodeLine(l)),
    group,
  );
  return client.createBatch(inputId, group);
}

/** The ProviderError `p` rejects with; a resolution or any other error fails the test. */
export async function rejection(p: Promise<unknown>): Promise<ProviderError> {
  const err = await p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  if (!(err instanceof ProviderError)) throw new Error(`expected a ProviderError, got ${String(err)}`);
  return err;
}

/**
 * A create the generator was SIGKILLed in: the fake makes the batch and never answers
 * (`hangAt = 'created'`), and the call is aborted (`generator killed`) once the batch exists.
 * `pending` is the aborted call, for the spec to see it reject.
 */
export async function abandonedCreate(
  client: UpstreamBatchApi,
  fake: FakeBatchUpstream<string> & { batches: Map<string, unknown> },
  line: UpstreamBatchLine,
  group: string,
): Promise<{ inputId: string; pending: Promise<UpstreamBatchRef> }> {
  fake.hangAt = 'created';
  const { inputId } = await client.uploadInput([client.encodeLine(line)], group);
  const crashed = new AbortController();
  const pending = client.createBatch(inputId, group, crashed.signal);
  pending.catch(() => undefined); // seen by the spec once aborted
  while (fake.batches.size === 0) await new Promise((r) => setTimeout(r, 5));
  crashed.abort(new Error('generator killed'));
  return { inputId, pending };
}

/**
 * Reads a batch's results while the fake holds its result file after `held` lines, letting
 * it go once `held` results are in: what was read, and how many lines the fake had written
 * when the first result and the `held`-th arrived (a client that waits for the whole file
 * never gets that far).
 */
export async function readWhileHeld(
  fake: FakeBatchUpstream<string>,
  results: AsyncIterable<UpstreamBatchResult>,
  held: number,
): Promise<{ keys: Set<string>; failed: UpstreamBatchResult[]; writtenAtFirst: number; writtenAtHeld: number }> {
  fake.holdOutputAfter(held);
  const keys = new Set<string>();
  const failed: UpstreamBatchResult[] = [];
  let writtenAtFirst = -1;
  let writtenAtHeld = -1;
  for await (const r of results) {
    if (!r.ok) failed.push(r);
    keys.add(r.key);
    if (keys.size === 1) writtenAtFirst = fake.linesWritten;
    if (keys.size === held) {
      writtenAtHeld = fake.linesWritten;
      fake.release();
    }
  }
  return { keys, failed, writtenAtFirst, writtenAtHeld };
}
