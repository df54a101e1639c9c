/**
 * The rate-limited scenario's strict upstream (RateLimitedOpenAiFake) in a process of its own,
 * forked by RateLimitedUpstream (rate-limited-upstream.ts). In the bench's process a stall
 * (polling Kiln's database, building results) delayed the fake's handlers, so it counted calls
 * in a later rate window than they were sent and refused them: 429s no upstream on another
 * machine would give. Here nothing else runs on its event loop.
 *
 * argv[2]: the StrictLimits as JSON. Reports `{type: 'ready', baseUrl}` over IPC; answers
 * `{type: 'stats'}` with its counters. Ends on SIGTERM, and when the bench goes away (the IPC
 * channel closes), so a bench that dies without cleaning up leaves no upstream behind.
 */
import { RateLimitedOpenAiFake, StrictLimits } from '../../libs/testing/src/fakes/openai/openai-rate-limited.fake';
import type { Outage } from '../../libs/testing/src/fakes/fake-upstream';
import type { UpstreamStats } from './rate-limited-upstream';

const fake = new RateLimitedOpenAiFake(JSON.parse(process.argv[2] ?? '') as StrictLimits);
/** When the outage began (calls from then on were answered by it). */
let outageSince = Infinity;

process.on('message', (m: { type?: string; outage?: Outage }) => {
  // The failover scenario takes the upstream down (every call answered 503) from a moment it picks.
  if (m.type === 'outage') {
    fake.outage = m.outage ?? null;
    outageSince = fake.outage ? Date.now() : Infinity;
    return;
  }
  if (m.type !== 'stats') return;
  const stats: UpstreamStats = {
    type: 'stats',
    accepted: fake.accepted,
    refusedAt: fake.refusedAt,
    refusedShare: fake.refusedShare,
    maxInFlight: fake.maxInFlight,
    downAt: fake.outage ? fake.requests.filter((r) => r.receivedAt >= outageSince).map((r) => r.receivedAt) : [],
  };
  process.send?.(stats);
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => void fake.stop().finally(() => process.exit(0)));
void fake.start().then((baseUrl) => process.send?.({ type: 'ready', baseUrl }));
