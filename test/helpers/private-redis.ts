import { ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import Redis from 'ioredis';

/** A port the OS says is free right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A redis-server child of the test's own, to kill, freeze (SIGSTOP) and restart without
 * touching the Redis every other test shares. No persistence: a restart starts empty.
 */
export class PrivateRedis {
  private child: ChildProcess | null = null;

  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.restart();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** A client of the test's own (the caller disconnects it). */
  client(): Redis {
    return new Redis(this.url, { maxRetriesPerRequest: 1, commandTimeout: 1000 });
  }

  async restart(): Promise<void> {
    if (this.child) throw new Error('redis-server is already running');
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
      {
        stdio: 'ignore',
      },
    );
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = null;
    });
    const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    try {
      for (let tries = 0; ; tries++) {
        try {
          await probe.connect();
          if ((await probe.ping()) === 'PONG') return;
        } catch (err) {
          if (tries > 100) throw err;
          probe.disconnect();
          await sleep(50);
        }
      }
    } finally {
      probe.disconnect();
    }
  }

  /** SIGKILL: connections drop at once, nothing answers until restart(). */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  }

  /** SIGSTOP: connections stay open and nothing answers, like a server stuck in a long command. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.child?.kill('SIGCONT');
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
