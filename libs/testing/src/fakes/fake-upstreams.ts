import type { ProviderTypeName } from '@app/providers';
import { bflDialect } from './bfl/bfl.fake';
import { falDialect } from './fal/fal.fake';
import { FakeQueueOptions, FakeQueueUpstream } from './fake-queue-upstream';
import type { FakeUpstream } from './fake-upstream';
import { GeminiFakeUpstream } from './gemini/gemini.fake';
import { OpenAiFakeUpstream } from './openai/openai.fake';
import { replicateDialect } from './replicate/replicate.fake';

/** The dialect of each queue type's fake (FakeQueueUpstream), each in its type's folder. */
export const QUEUE_DIALECTS = { fal: falDialect, replicate: replicateDialect, bfl: bflDialect } as const;

export type QueueTypeName = keyof typeof QUEUE_DIALECTS;

/** A local stand-in for a queue type's upstream (behaviours: see FakeQueueUpstream). */
export function fakeQueueUpstream(type: QueueTypeName, options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream(QUEUE_DIALECTS[type], options);
}

/**
 * Every provider type's test double, by type: a fake upstream on 127.0.0.1, or null for a
 * type that calls no upstream (it needs no key). Production code knows nothing of these;
 * fake-upstreams.spec.ts checks that every type that calls an upstream has one here.
 */
export const FAKE_UPSTREAMS: Record<ProviderTypeName, (() => FakeUpstream) | null> = {
  builtin: null,
  openai: () => new OpenAiFakeUpstream(),
  gemini: () => new GeminiFakeUpstream(),
  simulated: null,
  fal: () => fakeQueueUpstream('fal'),
  replicate: () => fakeQueueUpstream('replicate'),
  bfl: () => fakeQueueUpstream('bfl'),
};
