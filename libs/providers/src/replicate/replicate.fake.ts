import { FakeQueueOptions, FakeQueueUpstream } from '../fake-queue-upstream';

/** A local Replicate stand-in on 127.0.0.1 for tests and the bench (behaviours: see FakeQueueUpstream). */
export function fakeReplicate(options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream('replicate', options);
}
