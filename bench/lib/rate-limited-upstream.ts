import * as path from 'node:path';
import type { StrictLimits } from '../../libs/testing/src/fakes/openai/openai-rate-limited.fake';
import { NodeChild } from './children';
import type { KilnStack } from './kiln';

/** The counters RateLimitedOpenAiFake keeps, as its process reports them. */
export interface UpstreamStats {
  type: 'stats';
  accepted: number;
  /** When each refusal happened (the child's Date.now(): the same clock as the bench's). */
  refusedAt: number[];
  /** Share of the calls refused, 0..1 (RateLimitedOpenAiFake.refusedShare). */
  refusedShare: number;
  maxInFlight: number;
  /** When each call the outage answered arrived (empty while up). */
  downAt: number[];
}

/**
 * A RateLimitedOpenAiFake in a child process (rate-limited-upstream.main.ts), so that what
 * the bench does meanwhile cannot delay its handlers and move calls into a later rate window.
 * Forked from dist/ as Kiln's own processes and the baselines are (the bench runs built).
 */
export class RateLimitedUpstream {
  private constructor(
    private readonly child: NodeChild,
    readonly baseUrl: string,
  ) {}

  /** Starts the process and waits for its port; a process that does not come up is stopped. */
  static async start(stack: KilnStack, name: string, limits: StrictLimits): Promise<RateLimitedUpstream> {
    const child = NodeChild.start({
      name,
      script: stack.distPath('bench/lib/rate-limited-upstream.main.js'),
      args: [JSON.stringify(limits)],
      env: process.env,
      logFile: path.join(stack.logDir, `${name}.log`),
    });
    try {
      const { baseUrl } = await child.nextMessage<{ type: string; baseUrl: string }>((m) => m.type === 'ready', 20_000);
      return new RateLimitedUpstream(child, baseUrl);
    } catch (err) {
      await child.stop();
      throw err;
    }
  }

  get pid(): number {
    return this.child.pid;
  }

  async stats(): Promise<UpstreamStats> {
    const answer = this.child.nextMessage<{ type: string }>((m) => m.type === 'stats', 10_000);
    this.child.send({ type: 'stats' });
    return (await answer) as UpstreamStats;
  }

  /** From now every call is answered by the outage (503 for 'down'); null: up again. */
  setOutage(outage: 'down' | 'hang' | 'reset' | null): void {
    this.child.send({ type: 'outage', outage });
  }

  stop(): Promise<void> {
    return this.child.stop();
  }
}
