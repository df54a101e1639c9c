import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createServer, Server, ServerResponse } from 'node:http';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode } from '@app/errors';
import { KilnMetrics } from '@app/metrics';
import { RedisService } from '@app/redis';
import { StorageDriver } from '@app/storage';

const CHECK_TIMEOUT_MS = 1500;

type Check = { status: 'up' } | { status: 'down'; message: string };

/**
 * The generator's health signal, for container healthchecks and orchestrators, on
 * GENERATOR_HEALTH_PORT (none when unset): GET /healthz answers while the process runs;
 * GET /readyz also checks PostgreSQL, Redis and the object store, in the api's /readyz shape,
 * and answers 503 once a shutdown has begun; GET /metrics is the generator's Prometheus
 * metrics. Unauthenticated: the port is for the container network and is not published.
 */
@Injectable()
export class GeneratorHealthServer implements OnApplicationShutdown {
  private readonly logger = new Logger('GeneratorHealth');
  private server: Server | null = null;
  private closing = false;

  constructor(
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly redis: RedisService,
    private readonly storage: StorageDriver,
    private readonly metrics: KilnMetrics,
  ) {}

  /** Resolves once listening, or at once when no port is configured. */
  async listen(): Promise<void> {
    const port = this.config.generator.healthPort;
    if (port === null) return;
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return send(res, 405, { error: { code: ErrorCode.InvalidRequest, message: 'Only GET' } });
      if (path === '/healthz') return send(res, 200, { status: 'ok' });
      if (path === '/metrics') {
        this.metrics.render().then(
          ({ contentType, body }) => {
            res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
            res.end(body);
          },
          (err: Error) => send(res, 500, { error: { code: ErrorCode.InternalError, message: err.message } }),
        );
        return;
      }
      if (path === '/readyz') {
        this.readiness().then(
          (body) => send(res, body.status === 'ok' ? 200 : 503, body),
          () => send(res, 503, { status: 'error' }),
        );
        return;
      }
      send(res, 404, { error: { code: ErrorCode.NotFound, message: 'Not found' } });
    });
    // Health answers are tiny; a client that stalls must not hold a socket.
    server.requestTimeout = 5000;
    server.headersTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '0.0.0.0', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.logger.log(`Health checks and metrics on :${port} (/healthz, /readyz, /metrics)`);
  }

  /** From the first shutdown signal: /readyz answers 503, /healthz still 200. */
  shuttingDown(): void {
    this.closing = true;
  }

  async readiness(): Promise<{ status: 'ok' | 'error'; details: Record<string, Check> }> {
    const [database, redis, storage] = await Promise.all([
      probe(() => withTimeout(this.db.query('SELECT 1'), CHECK_TIMEOUT_MS, 'PostgreSQL did not answer')),
      probe(async () => {
        if (!(await this.redis.ping(CHECK_TIMEOUT_MS))) throw new Error('Redis did not answer PING');
      }),
      probe(() => this.storage.check(CHECK_TIMEOUT_MS)),
    ]);
    const details: Record<string, Check> = { database, redis, storage };
    if (this.closing) details.generator = { status: 'down', message: 'shutting down' };
    const ok = Object.values(details).every((c) => c.status === 'up');
    return { status: ok ? 'ok' : 'error', details };
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

async function probe(check: () => Promise<unknown>): Promise<Check> {
  try {
    await check();
    return { status: 'up' };
  } catch (err) {
    return { status: 'down', message: (err as Error).message };
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  res.end(JSON.stringify(body));
}
