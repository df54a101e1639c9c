import { FAST_MODEL, prompts, waitAllDone } from './harness';
import type { BenchAccount, KilnStack } from './kiln';
import { log } from './util';

/** What the scenarios against fake upstreams in child processes run with. */
export interface UpstreamRun {
  accounts: BenchAccount[];
  /** POSTs `images` as batches of up to `perBatch` of `model`, over the accounts in turn, at once. */
  postBatches: (model: string, images: number, perBatch: number, tag: string) => Promise<void>;
}

/**
 * The start the scenarios that send a model to fake upstreams share (rate-limited, failover):
 * plan limits lifted, two accounts, `generators` generators of GENERATOR_CONCURRENCY 100, and a
 * warm-up batch on the 0 ms model so that nothing measured pays for a cold start. The caller
 * stops the generators (stack.stopGenerator) in its finally, the warm-up's failure included.
 */
export async function startUpstreamRun(stack: KilnStack, name: string, generators: number): Promise<UpstreamRun> {
  await stack.liftScalePlanLimits();
  await stack.routeModel(FAST_MODEL, { type: 'simulated', latencyMs: 0 });
  const accounts = [await stack.createAccount(name), await stack.createAccount(name)];
  const env = { GENERATOR_CONCURRENCY: '100' };
  await stack.startGenerator(env);
  for (let g = 1; g < generators; g++) await stack.addGenerator(env);
  log(`${name}: warm-up batch (0 ms model)`);
  await stack.createBatch(accounts[0], { model: FAST_MODEL, prompts: prompts(50, 'warm-up') });
  await waitAllDone(stack, accounts, 120_000);
  return {
    accounts,
    postBatches: async (model, images, perBatch, tag) => {
      for (let i = 0; i < Math.ceil(images / perBatch); i++) {
        const n = Math.min(perBatch, images - i * perBatch);
        await stack.createBatch(accounts[i % accounts.length], { model, prompts: prompts(n, `${tag} ${i}`) });
      }
    },
  };
}
