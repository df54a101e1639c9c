import { ProcessFigures, ProcessSampler } from '../lib/children';
import { BUILTIN_4K_MODEL, prompts, waitAllDone } from '../lib/harness';
import { BenchContext, Figure, ScenarioResult } from '../lib/types';
import { log, round } from '../lib/util';
import { preparePipeline, runKilnPipeline } from './pipeline';

const LIMIT_MB = 600;
/** Issue 26: the 4K builtin batch's peak (two 4096x4096 RGBA frames alone are 128 MiB). */
const BUILTIN_LIMIT_MB = 400;
/** The api's peak during the 30,000-image pipeline (issue 47): it serves the batches' creation, nothing per task. */
const API_LIMIT_MB = 300;
const BUILTIN_IMAGES = 20;
const STANDALONE_PIPELINE_IMAGES = 10_000;

/** Scenario 5: peak RSS of the api and generator under the pipeline, and of a generator rendering 4K builtin images. */
export async function memory(ctx: BenchContext): Promise<Omit<ScenarioResult, 'durationSec'>> {
  const { stack } = ctx;
  const notes: string[] = [];
  const figures: Figure[] = [];

  // Peaks during scenario 3: taken from it when it ran in this bench run, else measured here.
  let pipelineRuns = ctx.shared.pipelineMemory?.runs as { images: number; processes: Record<string, ProcessFigures> }[] | undefined;
  if (!pipelineRuns) {
    log(`memory: pipeline scenario not run: ${STANDALONE_PIPELINE_IMAGES} images through Kiln to sample RSS`);
    const { accounts } = await preparePipeline(stack);
    try {
      const run = await runKilnPipeline(stack, accounts, STANDALONE_PIPELINE_IMAGES);
      pipelineRuns = [{ images: run.images, processes: run.window.processes }];
    } finally {
      await stack.stopGenerator();
    }
  }
  const largest = pipelineRuns.reduce((a, b) => (b.images > a.images ? b : a));
  const label = `${largest.images.toLocaleString('en-US')}-image pipeline`;
  // The api runs from the first scenario on: its VmHWM is its lifetime peak (in a full run,
  // the polling scenario's), so the figure is the RSS sampled during the pipeline run itself.
  const api = largest.processes.api;
  figures.push(rss(`api peak RSS, ${label} (sampled during the run)`, api ? { ...api, hwmMb: NaN } : undefined, API_LIMIT_MB));
  if (api && api.hwmMb > api.peakRssMb) notes.push(`api VmHWM (its lifetime peak, reached before the pipeline): ${api.hwmMb} MB.`);
  figures.push(rss(`generator peak RSS, ${label}`, largest.processes.generator, LIMIT_MB));

  await stack.routeModel(BUILTIN_4K_MODEL, { type: 'builtin' });
  const builtin = await builtin4k(ctx, {});
  if (builtin.failed) notes.push(`4K builtin batch: ${BUILTIN_IMAGES - builtin.failed} succeeded, ${builtin.failed} failed.`);
  figures.push(rss(`generator peak RSS, ${BUILTIN_IMAGES}-image 4K builtin batch`, builtin.figures, BUILTIN_LIMIT_MB));
  // The same batch with glibc's defaults (the generator is deployed with two malloc arenas and
  // a fixed mmap threshold): libvips allocates from many threads, per-thread arenas keep freed
  // image buffers resident, and the dynamic mmap threshold moves large buffers into them.
  const arenas = await builtin4k(ctx, { MALLOC_ARENA_MAX: '', MALLOC_MMAP_THRESHOLD_: '' });
  figures.push({
    ...rss(`generator peak RSS, same batch, glibc defaults (diagnostic)`, arenas.figures, LIMIT_MB),
    target: undefined,
    met: undefined,
  });

  return {
    id: 'memory',
    title: 'Memory: peak resident set size',
    method: [
      "RSS sampled from /proc/<pid>/status (VmRSS every 100 ms, 50 ms for the 4K batch) and VmHWM (the kernel's lifetime peak) read at the end; the larger of the two is reported.",
      `Pipeline: during the largest pipeline run of scenario 3 (${largest.images.toLocaleString('en-US')} images; generator concurrency 50).`,
      `4K builtin: a freshly started generator (default GENERATOR_CONCURRENCY and RENDER_CONCURRENCY) rendering one batch of ${BUILTIN_IMAGES} 4K images (1:1, 4096x4096) on the builtin sharp renderer; it took ${builtin.wallSec} s. Like every generator of the bench it runs with MALLOC_ARENA_MAX=2 and MALLOC_MMAP_THRESHOLD_=131072, as docker/Dockerfile and scripts/start.sh deploy it. The diagnostic row repeats the batch in a fresh generator without either, on glibc's defaults (8 arenas per core, an mmap threshold that rises with the buffers freed) (${arenas.wallSec} s).`,
    ],
    figures,
    notes,
    profiles: [],
    details: { pipelineRuns, builtin4k: builtin, builtin4kGlibcDefaultArenas: arenas },
  };
}

function rss(metric: string, p: ProcessFigures | undefined, limitMb?: number): Figure {
  const peak = p ? round(Math.max(p.peakRssMb, Number.isNaN(p.hwmMb) ? 0 : p.hwmMb), 0) : NaN;
  return {
    metric,
    unit: 'MB',
    kiln: peak,
    baseline: null,
    ratio: limitMb ? round(peak / limitMb, 2) : null,
    ...(limitMb ? { baselineLabel: `limit ${limitMb} MB`, target: `< ${limitMb} MB`, targetOn: 'kiln' as const, met: peak < limitMb } : {}),
  };
}

/** One 20-image 4K batch on the builtin renderer, in a freshly started generator with `env`. */
async function builtin4k(
  ctx: BenchContext,
  env: Record<string, string>,
): Promise<{ figures: ProcessFigures; wallSec: number; failed: number }> {
  const { stack } = ctx;
  log(`memory: ${BUILTIN_IMAGES} 4K images on the builtin renderer, fresh generator ${JSON.stringify(env)}`);
  const account = await stack.createAccount('memory');
  const gen = await stack.startGenerator(env);
  const sampler = new ProcessSampler({ generator: gen.pid }, 50).start();
  const t0 = Date.now();
  try {
    await stack.createBatch(account, { model: BUILTIN_4K_MODEL, resolution: '4K', prompts: prompts(BUILTIN_IMAGES, '4K') });
    const end = await waitAllDone(stack, [account], 15 * 60_000, 100);
    const figures = roundFigures(sampler.stop().generator);
    const outcome = await stack.taskOutcomes([account.id]);
    return { figures, wallSec: round((end - t0) / 1000, 1), failed: BUILTIN_IMAGES - outcome.succeeded };
  } finally {
    sampler.stop();
    await stack.stopGenerator();
  }
}

function roundFigures(p: ProcessFigures): ProcessFigures {
  return { peakRssMb: round(p.peakRssMb, 0), hwmMb: round(p.hwmMb, 0), cpuCores: round(p.cpuCores, 2) };
}
