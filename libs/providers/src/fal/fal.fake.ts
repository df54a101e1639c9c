import { FakeQueueOptions, FakeQueueUpstream } from '../fake-queue-upstream';

/** A local Fal stand-in on 127.0.0.1 for tests and the bench (behaviours: see FakeQueueUpstream). */
export function fakeFal(options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream('fal', options);
}
