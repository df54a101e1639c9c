import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpuPerUnit, measureWindow, profiled, shouldProfile, WindowFigures } from '../lib/harness';
import { KilnPipelineRun, preparePipeline, runKilnPipeline } from './pipeline';
import { BenchContext, Figure, ScenarioResult, throughput } from '../lib/types';
import { log, round, waitFor } from '../lib/util';

const TARGET = 0.8;
/**
 * Alternating rounds; the figure is the median of the rounds' ratios (each round's run with
 * endpoints against the run without that precedes it): the pipeline's own figure spreads
 * ±15 % run to run, and a ratio of the best of each side took each from a different moment.
 */
const ROUNDS = 5;

/**
 * The pipeline scenario with one endpoint per account subscribed to task.succeeded (so one
 * delivery per image), against the same pipeline without endpoints, alternating. The receiver
 * is an HTTP server in the bench process on 127.0.0.1 answering 204 (the bench's Kiln runs
 * with WEBHOOK_ALLOW_PRIVATE for it). A run counts once every delivery was made.
 */
export async function webhooks(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack, opts } = ctx;
  const images = opts.pipelineSizes[0];
  const received = new Set<string>();
  const server = http.createServer((req, res) => {
    const id = String(req.headers['webhook-id'] ?? '');
    req.resume();
    req.on('end', () => {
      received.add(id);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/bench`;
  const setup = await preparePipeline(stack);
  const plain: KilnPipelineRun[] = [];
  const hooked: (KilnPipelineRun & { deliveredSec: number; delivered: number; deliveredWindow: WindowFigures })[] = [];
  const figures: Figure[] = [];
  const notes: string[] = [];
  const profiles: ScenarioResult['profiles'] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      plain.push(await runKilnPipeline(stack, setup.accounts, images));
      const endpoints: { account: (typeof setup.accounts)[number]; id: string }[] = [];
      for (const account of setup.accounts) {
        const res = await stack.request<{ endpoint: { id: string } }>('POST', '/v1/webhooks', account.key, {
          url,
          events: ['task.succeeded'],
        });
        if (res.status !== 201) throw new Error(`POST /v1/webhooks: ${res.status} ${JSON.stringify(res.body)}`);
        endpoints.push({ account, id: res.body.endpoint.id });
      }
      received.clear();
      // CPU from the first POST to the last delivery: the whole cost of the images and their events.
      const measured = await measureWindow(stack, { api: stack.api!.pid, generator: stack.generator!.pid });
      const t0 = Date.now();
      // The last round of a profiled bench records the generator while it renders and sends.
      const profile = r === ROUNDS - 1 && shouldProfile(ctx, false);
      const { result: run, profiles: taken } = profile
        ? await profiled(ctx, [stack.generator!], () => runKilnPipeline(stack, setup.accounts, images))
        : { result: await runKilnPipeline(stack, setup.accounts, images), profiles: [] };
      profiles.push(...taken);
      const deliveredRows = async () =>
        (
          await stack.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = ANY($1::uuid[]) AND status = 'delivered'`,
            [endpoints.map((e) => e.id)],
          )
        ).rows[0].n;
      // Received by the receiver and recorded as delivered by the generator.
      await waitFor(
        `${images} webhook deliveries`,
        async () => (received.size >= images && (await deliveredRows()) >= images ? true : undefined),
        10 * 60_000,
        50,
      );
      const deliveredSec = round((Date.now() - t0) / 1000, 2);
      const deliveredWindow = await measured();
      hooked.push({ ...run, deliveredSec, delivered: await deliveredRows(), deliveredWindow });
      for (const e of endpoints) await stack.request('DELETE', `/v1/webhooks/${e.id}`, e.account.key);
      log(
        `webhooks: ${images} images: ${plain[r].tasksPerSec} tasks/s without, ${run.tasksPerSec} with (every delivery made ${deliveredSec} s after the first POST); ` +
          `CPU ms per image ${cpuPerUnit('without:', plain[r].window, plain[r].tasksPerSec)}; ${cpuPerUnit('with:', deliveredWindow, images / deliveredSec)}`,
      );
    }
  } finally {
    await stack.stopGenerator();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  // The median round by its ratio (the lower middle of an even count): a real pair of runs.
  const ratios = hooked.map((h, r) => round(h.tasksPerSec / plain[r].tasksPerSec, 2));
  const middle = [...ratios.keys()].sort((a, b) => ratios[a] - ratios[b])[Math.floor((ratios.length - 1) / 2)];
  const withHooks = hooked[middle];
  const without = plain[middle];
  figures.push({
    ...throughput(
      `tasks/s, ${images.toLocaleString('en-US')} images, task.succeeded subscribed (median of ${ratios.length} rounds)`,
      'tasks/s',
      withHooks.tasksPerSec,
      without.tasksPerSec,
      TARGET,
    ),
    baselineLabel: 'the same pipeline without endpoints, same round',
  });
  for (const h of hooked) if (h.delivered !== images) notes.push(`A run delivered ${h.delivered} of ${images} events.`);
  notes.push(
    `Per round, tasks/s with / without endpoints: ${hooked.map((h, r) => `${h.tasksPerSec} / ${plain[r].tasksPerSec}`).join(', ')}; ratios ${ratios.join(', ')} (spread ${Math.min(...ratios)}-${Math.max(...ratios)}).`,
  );
  notes.push(`Every delivery made ${withHooks.deliveredSec} s after the first POST (the pipeline itself took ${withHooks.wallSec} s).`);
  notes.push(
    `CPU ms per image (median round): ${cpuPerUnit('without endpoints:', without.window, without.tasksPerSec)}; ${cpuPerUnit('with, to the last delivery:', withHooks.deliveredWindow, images / withHooks.deliveredSec)} plus the receiver in the bench process.`,
  );
  return {
    id: 'webhooks',
    title: 'Pipeline throughput with webhooks: one delivery per image',
    method: [
      `The pipeline scenario (${images.toLocaleString('en-US')} images) with one endpoint per account subscribed to task.succeeded, a receiver in the bench process on 127.0.0.1 answering 204; against the same pipeline without endpoints, ${ROUNDS} alternating rounds (without, then with); the figure is the round with the median ratio, every round in the notes.`,
      'The events are written in the group commits of the task successes; the generator sends them (its own sender, 50 at a time) while it renders.',
    ],
    figures,
    notes,
    profiles,
    details: { images, plain, hooked },
  };
}
