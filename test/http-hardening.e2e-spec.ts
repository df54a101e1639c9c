import { AddressInfo, connect, createServer, Server, Socket } from 'node:net';
import { buildConfig, KILN_CONFIG, KilnConfig } from '@app/config';
import { bootTestApp, TestAccount, TestApp } from '@app/testing';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';

/**
 * A TCP proxy in front of the run's PostgreSQL: closing it is a real outage of the path the
 * api uses (refused connections, established ones cut), reopening it is the recovery.
 * Freezing it is a server that stops answering without closing anything (SIGSTOP, a network
 * that drops packets): connections are accepted, bytes are held, none are passed on.
 */
class PgProxy {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private readonly pairs = new Set<[Socket, Socket]>();
  private frozen = false;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      for (const s of pair) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          this.pairs.delete(pair);
          client.destroy();
          upstream.destroy();
        });
      }
      if (!this.frozen) this.flow(pair);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  freeze(): void {
    this.frozen = true;
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /** What was held is passed on, in order, and the connections carry on. */
  thaw(): void {
    this.frozen = false;
    for (const pair of this.pairs) this.flow(pair);
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private flow([client, upstream]: [Socket, Socket]): void {
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

/** Resolves when the socket closes, with what the server sent before. */
function closed(socket: Socket): Promise<{ data: string; ms: number }> {
  const started = performance.now();
  let data = '';
  socket.on('data', (d) => (data += d.toString()));
  socket.on('error', () => undefined);
  return new Promise((resolve) => socket.on('close', () => resolve({ data, ms: performance.now() - started })));
}

function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

/** One raw HTTP/1.1 GET on a fresh connection; the status code, or null when the connection closed without one. */
async function rawGet(port: number, path: string): Promise<number | null> {
  const socket = await openSocket(port);
  const done = closed(socket);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: kiln.test\r\nConnection: close\r\n\r\n`);
  const { data } = await done;
  const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
  return m ? Number(m[1]) : null;
}

describe('HTTP hardening: security headers, slow clients, connections per IP, database outage', () => {
  const REQUEST_TIMEOUT_MS = 1500;
  const HEADERS_TIMEOUT_MS = 1000;
  const MAX_CONNECTIONS_PER_IP = 4;
  const QUERY_TIMEOUT_MS = 1000;
  let t: TestApp;
  let port: number;
  let proxy: PgProxy;
  let a: TestAccount;

  beforeAll(async () => {
    const base = buildConfig(process.env);
    const dbUrl = new URL(base.databaseUrl);
    proxy = new PgProxy({ host: dbUrl.hostname, port: Number(dbUrl.port || 5432) });
    await proxy.open();
    dbUrl.hostname = '127.0.0.1';
    dbUrl.port = String(proxy.port);
    const config: KilnConfig = {
      ...base,
      databaseUrl: dbUrl.toString(),
      databaseConnectTimeoutMs: 1000,
      databaseQueryTimeoutMs: QUERY_TIMEOUT_MS,
      http: { requestTimeoutMs: REQUEST_TIMEOUT_MS, headersTimeoutMs: HEADERS_TIMEOUT_MS, maxConnectionsPerIp: MAX_CONNECTIONS_PER_IP },
    };
    t = await bootTestApp(ApiModule, configureApp, [[KILN_CONFIG, config]]);
    await t.app.listen(0, '127.0.0.1');
    port = (t.app.getHttpServer().address() as AddressInfo).port;
    a = await t.account();
  });
  afterAll(async () => {
    await t.close();
    await proxy.close();
  });

  /** GET /v1/me until it answers 200, for up to 10 s: the status it ended with. */
  const meStatusOnceBack = async (): Promise<number> => {
    let status = 0;
    for (let i = 0; i < 40 && status !== 200; i++) {
      status = (await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 250));
    }
    return status;
  };

  const expectSecurityHeaders = (res: { headers: Record<string, string> }) => {
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-store');
  };

  it('nosniff and no-store on JSON answers: a 200, a created secret, a 404, a body-parser refusal', async () => {
    expectSecurityHeaders(await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200));
    expectSecurityHeaders(await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send({}).expect(201));
    expectSecurityHeaders(await t.http.get('/v1/nope').expect(404));
    expectSecurityHeaders(await t.http.post('/v1/dashboard/login').set('Content-Type', 'application/json').send('{"x":').expect(400));
    expectSecurityHeaders(await t.http.get('/v1/me').expect(401));
  });

  it('a client that sends half its headers and stalls is cut off within the headers timeout', async () => {
    const socket = await openSocket(port);
    const done = closed(socket);
    socket.write('GET /healthz HTTP/1.1\r\nHost: kiln.test\r\n');
    const { data, ms } = await done;
    expect(data).toMatch(/^HTTP\/1\.1 408/);
    // The limit plus Node's sweep interval, with a wide margin for a loaded machine.
    expect(ms).toBeLessThan(HEADERS_TIMEOUT_MS + 4000);
  });

  it('a client that sends half its body and stalls is cut off within the request timeout', async () => {
    const socket = await openSocket(port);
    const done = closed(socket);
    socket.write(
      'POST /v1/dashboard/login HTTP/1.1\r\nHost: kiln.test\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"email":',
    );
    const { ms } = await done;
    expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS + 4000);
  });

  it('a client that keeps trickling its body (never idle) is cut at the request timeout with 408, not later: the sweep runs every second at most', async () => {
    // Node checks the timeouts on a periodic sweep of open connections, 30 s apart unless set:
    // a 30 s limit would then cut anywhere up to 60 s.
    expect((t.app.getHttpServer() as { connectionsCheckingInterval: number }).connectionsCheckingInterval).toBeLessThanOrEqual(1000);
    const socket = await openSocket(port);
    const done = closed(socket);
    socket.write('POST /v1/dashboard/login HTTP/1.1\r\nHost: kiln.test\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{');
    const trickle = setInterval(() => socket.writable && socket.write(' '), 200);
    try {
      const { data, ms } = await done;
      expect(data).toMatch(/^HTTP\/1\.1 408/);
      expect(ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS + 4000);
    } finally {
      clearInterval(trickle);
    }
  });

  it('one address may hold only MAX_CONNECTIONS_PER_IP connections; the next is closed, and a freed slot is usable again', async () => {
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS_PER_IP }, () => openSocket(port)));
    try {
      const extra = await openSocket(port);
      const { data, ms } = await closed(extra);
      expect(data).toBe('');
      expect(ms).toBeLessThan(2000);
      expect(await rawGet(port, '/healthz')).toBeNull();
    } finally {
      await Promise.all(held.map((s) => (s.destroy(), closed(s))));
    }
    expect(await rawGet(port, '/healthz')).toBe(200);
  });

  it('PostgreSQL unreachable -> 503 service_unavailable with Retry-After, quickly; nothing charged; back to 200 when it returns', async () => {
    const before = await t.balance(a.id);
    await proxy.close();
    try {
      for (const req of [
        () => t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`),
        () => t.admin('get', `/v1/admin/accounts/${a.id}`),
        () =>
          t.http
            .post('/v1/batches')
            .set('Authorization', `Bearer ${a.key}`)
            .send({ prompts: ['a fox'], model: 'eta-image' }),
      ]) {
        const started = performance.now();
        const res = await req();
        expect(performance.now() - started).toBeLessThan(3000);
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('service_unavailable');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expectSecurityHeaders(res);
      }
    } finally {
      await proxy.open();
    }
    expect(await meStatusOnceBack()).toBe(200);
    expect(await t.balance(a.id)).toBe(before);
  });

  it('PostgreSQL frozen (accepts, never answers) -> 503 service_unavailable within the query timeout, not a hung request; nothing charged; 200 once it answers again', async () => {
    const before = await t.balance(a.id);
    const batchesBefore = await t.db.query(`SELECT count(*)::int AS n FROM batches WHERE account_id = $1`, [a.id]);
    proxy.freeze();
    try {
      for (const req of [
        () => t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`),
        () =>
          t.http
            .post('/v1/batches')
            .set('Authorization', `Bearer ${a.key}`)
            .send({ prompts: ['a fox'], model: 'eta-image' }),
      ]) {
        const started = performance.now();
        const res = await req();
        // The statement timeout cannot fire on a server that is not running: the client's does.
        expect(performance.now() - started).toBeLessThan(QUERY_TIMEOUT_MS + 4000);
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('service_unavailable');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
      }
    } finally {
      proxy.thaw();
    }
    expect(await meStatusOnceBack()).toBe(200);
    expect(await t.balance(a.id)).toBe(before);
    expect(await t.db.query(`SELECT count(*)::int AS n FROM batches WHERE account_id = $1`, [a.id])).toEqual(batchesBefore);
  });

  it('a statement slower than DATABASE_QUERY_TIMEOUT_MS is cancelled by PostgreSQL itself (57014), which answers 503, not 500', async () => {
    const { toErrorBody } = await import('../apps/api/src/errors/error.filter');
    expect(await t.db.query(`SELECT setting FROM pg_settings WHERE name = 'statement_timeout'`)).toEqual([
      { setting: String(QUERY_TIMEOUT_MS) },
    ]);
    const slow = await t.db.query(`SELECT pg_sleep(5)`).then(
      () => null,
      (err: unknown) => err,
    );
    // The server's cancel, not the client's later give-up: the connection stays usable.
    expect(slow).toMatchObject({ driverError: { code: '57014' } });
    expect(toErrorBody(slow)).toMatchObject({ status: 503, body: { error: { code: 'service_unavailable' } }, unexpected: false });
    expect(await t.db.query(`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
  });

  it('a transaction PostgreSQL picks to break a deadlock (40P01) answers 503 with a short Retry-After, not 500', async () => {
    const { toErrorBody, CONFLICT_RETRY_AFTER_S } = await import('../apps/api/src/errors/error.filter');
    const [x, y] = await Promise.all([t.account({ credits: 1 }), t.account({ credits: 1 })]);
    const lockBoth = (first: string, second: string) =>
      t.db.transaction(async (m) => {
        // Found before this suite's short statement timeout cancels the wait (test role: superuser).
        await m.query(`SET LOCAL deadlock_timeout = '100ms'`);
        await m.query(`SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, [first]);
        await new Promise((r) => setTimeout(r, 200));
        await m.query(`SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, [second]);
      });
    // Opposite orders: PostgreSQL fails one of the two after deadlock_timeout, the other commits.
    const outcomes = await Promise.allSettled([lockBoth(x.id, y.id), lockBoth(y.id, x.id)]);
    const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(failed).toHaveLength(1);
    expect(failed[0].reason).toMatchObject({ driverError: { code: '40P01' } });
    expect(toErrorBody(failed[0].reason)).toMatchObject({
      status: 503,
      body: { error: { code: 'service_unavailable' } },
      unexpected: false,
      retryAfterSeconds: CONFLICT_RETRY_AFTER_S,
    });
  });
});
