import sharp from 'sharp';
import { ImageProvider, ProviderError, RenderRequest, RenderResult } from '../render.types';
import { reportProgress, sleep, throwIfAborted } from '../provider.utils';

export interface SimulatedProviderConfig {
  /** A fixed latency, or uniform between min and max (ms). Default 0. */
  latencyMs?: number | { min: number; max: number };
  /** Probability (0..1) of a non-retryable upstream failure. */
  failureRate?: number;
  /** Probability (0..1) of a retryable 429. */
  rateLimitRate?: number;
}

/** Longer side of every simulated image: small enough that benchmarks measure Kiln, not encoding. */
export const SIMULATED_LONG_EDGE = 64;

/**
 * Shared by every instance: a benchmark creates providers freely and still encodes each
 * size once. At most one entry per aspect ratio the catalog offers.
 */
const pngCache = new Map<string, Promise<Buffer>>();

/**
 * For tests and benchmarks: waits a configurable latency, then fails or rate-limits at the
 * configured rates, else returns a real PNG in the requested aspect ratio scaled so its
 * longer side is 64 px (16:9 gives 64x36). The result reports that produced size, not the
 * requested one.
 */
export class SimulatedProvider implements ImageProvider {
  constructor(
    private readonly config: SimulatedProviderConfig = {},
    private readonly random: () => number = Math.random,
  ) {}

  async render(req: RenderRequest): Promise<RenderResult> {
    throwIfAborted(req.signal);
    const latency = this.drawLatency();
    if (latency > 0) await sleep(latency, req.signal);
    reportProgress(req.onProgress, 30);

    // One draw split into [rate limit | failure | success], so each rate is exactly its probability.
    const roll = this.random();
    const rateLimitRate = clamp01(this.config.rateLimitRate);
    const failureRate = clamp01(this.config.failureRate);
    if (roll < rateLimitRate) {
      throw new ProviderError('rate_limited', 'Simulated rate limit (429)', { status: 429 });
    }
    if (roll < rateLimitRate + failureRate) {
      throw new ProviderError('upstream_error', 'Simulated upstream failure', { retryable: false });
    }

    const { width, height } = scaledSize(req.width, req.height);
    const data = await cachedPng(width, height);
    reportProgress(req.onProgress, 70);
    return { data, contentType: 'image/png', width, height };
  }

  private drawLatency(): number {
    const latency = this.config.latencyMs;
    if (latency === undefined) return 0;
    if (typeof latency === 'number') return Math.max(0, latency);
    const min = Math.max(0, Math.min(latency.min, latency.max));
    const max = Math.max(0, latency.min, latency.max);
    return min + this.random() * (max - min);
  }
}

function clamp01(value: number | undefined): number {
  if (value === undefined || Number.isNaN(value)) return 0;
  return Math.min(1, Math.max(0, value));
}

export function scaledSize(width: number, height: number): { width: number; height: number } {
  if (!(width > 0 && height > 0)) return { width: SIMULATED_LONG_EDGE, height: SIMULATED_LONG_EDGE };
  const scale = SIMULATED_LONG_EDGE / Math.max(width, height);
  return {
    width: Math.max(1, Math.round(width * scale)),
    height: Math.max(1, Math.round(height * scale)),
  };
}

export function cachedPng(width: number, height: number): Promise<Buffer> {
  const key = `${width}x${height}`;
  let png = pngCache.get(key);
  if (!png) {
    png = sharp({ create: { width, height, channels: 3, background: { r: 96, g: 128, b: 160 } } })
      .png()
      .toBuffer();
    // A failed encode must not poison the cache for every later render.
    png.catch(() => pngCache.delete(key));
    pngCache.set(key, png);
  }
  return png;
}
