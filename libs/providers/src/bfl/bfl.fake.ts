import { FakeQueueOptions, FakeQueueUpstream } from '../fake-queue-upstream';

/** A local Bfl stand-in on 127.0.0.1 for tests and the bench (behaviours: see FakeQueueUpstream). */
export function fakeBfl(options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream('bfl', options);
}
