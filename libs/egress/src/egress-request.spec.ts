import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { EgressError } from './egress.errors';
import { checkEgressTarget, egressRequest, EgressRequestOptions, ResolveHost } from './egress-request';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

interface Local {
  server: Server;
  port: number;
  origin: string;
  seen: { url: string; host: string | undefined; method: string }[];
  handler: Handler;
}

async function local(): Promise<Local> {
  const l = { seen: [], handler: (_req: IncomingMessage, res: ServerResponse) => res.end('ok') } as unknown as Local;
  l.server = createServer((req, res) => {
    l.seen.push({ url: req.url ?? '', host: req.headers.host, method: req.method ?? '' });
    l.handler(req, res);
  });
  await new Promise<void>((resolve) => l.server.listen(0, '127.0.0.1', resolve));
  l.port = (l.server.address() as AddressInfo).port;
  l.origin = `http://127.0.0.1:${l.port}`;
  return l;
}

async function stop(l: Local): Promise<void> {
  l.server.closeAllConnections();
  await new Promise((resolve) => l.server.close(resolve));
}

let upstream: Local;
let internal: Local;

beforeAll(async () => {
  upstream = await local();
  internal = await local();
});
afterAll(async () => {
  await stop(upstream);
  await stop(internal);
});
beforeEach(() => {
  upstream.seen = [];
  internal.seen = [];
  upstream.handler = (_req, res) => res.end('ok');
});

const PUBLIC_ONLY = { allowPrivate: false };
const ANYWHERE = { allowPrivate: true };

function options(overrides: Partial<EgressRequestOptions> = {}): EgressRequestOptions {
  return { policy: ANYWHERE, maxBytes: 1024 * 1024, timeoutMs: 5000, ...overrides };
}

async function refusal(p: Promise<unknown>): Promise<EgressError> {
  const err = await p.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EgressError);
  return err as EgressError;
}

describe('egressRequest', () => {
  it('reaches a private host when the policy allows it, sending the body', async () => {
    upstream.handler = (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.writeHead(201, { 'content-type': 'text/plain' }).end(`got ${Buffer.concat(chunks).toString()}`));
    };
    const res = await egressRequest(`${upstream.origin}/v1/x?y=1`, options({ method: 'POST', body: Buffer.from('hello') }));
    expect(res.status).toBe(201);
    expect(res.body.toString()).toBe('got hello');
    expect(upstream.seen).toEqual([{ url: '/v1/x?y=1', host: `127.0.0.1:${upstream.port}`, method: 'POST' }]);
  });

  it.each([
    ['loopback', () => `https://127.0.0.1:${internal.port}/`, 'loopback'],
    ['localhost (refused by name, before its lookup)', () => `https://localhost:${internal.port}/`, 'internal_name'],
    ['IPv6 loopback', () => `https://[::1]:${internal.port}/`, 'loopback'],
    ['IPv4-mapped loopback', () => `https://[::ffff:127.0.0.1]:${internal.port}/`, 'loopback'],
    ['the metadata service', () => 'https://169.254.169.254/latest/meta-data/', 'link_local'],
    ['a private network', () => 'https://10.1.2.3/image.png', 'private'],
    ['an unspecified address', () => `https://0.0.0.0:${internal.port}/`, 'unspecified'],
  ])('refuses %s without connecting', async (_name, url, range) => {
    const err = await refusal(egressRequest(url(), options({ policy: PUBLIC_ONLY })));
    expect(err).toMatchObject({ reason: 'forbidden_address', refused: true, detail: { range } });
    expect(internal.seen).toHaveLength(0);
  });

  it('refuses plain http unless the policy allows private targets', async () => {
    const resolve: ResolveHost = () => Promise.resolve([{ address: '93.184.215.14', family: 4 }]);
    const err = await refusal(egressRequest('http://example.com/a.png', options({ policy: PUBLIC_ONLY, resolve })));
    expect(err.reason).toBe('not_https');
  });

  it('refuses a name when any of its addresses is not public, looking it up once', async () => {
    const resolve = jest.fn<ReturnType<ResolveHost>, Parameters<ResolveHost>>().mockResolvedValue([
      { address: '93.184.215.14', family: 4 },
      { address: '10.0.0.7', family: 4 },
    ]);
    const err = await refusal(egressRequest('https://cdn.kiln.test/a.png', options({ policy: PUBLIC_ONLY, resolve })));
    expect(err).toMatchObject({ reason: 'forbidden_address', detail: { range: 'private' } });
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(resolve).toHaveBeenCalledWith('cdn.kiln.test');
  });

  it('connects to the checked address with the original Host, without a second lookup', async () => {
    const resolve = jest.fn<ReturnType<ResolveHost>, Parameters<ResolveHost>>().mockResolvedValue([{ address: '127.0.0.1', family: 4 }]);
    const res = await egressRequest(`http://images.kiln.test:${upstream.port}/a.png`, options({ resolve }));
    expect(res.body.toString()).toBe('ok');
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(upstream.seen).toEqual([{ url: '/a.png', host: `images.kiln.test:${upstream.port}`, method: 'GET' }]);
  });

  it('with keepAlive, reuses a connection only for the same checked address; without it, one connection a request', async () => {
    // Listening on every address, so 127.0.0.1 and 127.0.0.2 reach the same server.
    const server = createServer((_req, res) => res.end('ok'));
    const remotes: string[] = [];
    server.on('connection', (socket) => remotes.push(socket.localAddress ?? ''));
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const answers = ['127.0.0.1', '127.0.0.2', '127.0.0.1'];
      const resolve: ResolveHost = () => Promise.resolve([{ address: answers.shift()!, family: 4 }]);
      for (let i = 0; i < 3; i++) {
        const res = await egressRequest(`http://hooks.kiln.test:${port}/`, options({ resolve, keepAlive: true }));
        expect(res.body.toString()).toBe('ok');
      }
      // The third request's check approved 127.0.0.1 again: the first connection, reused.
      expect(remotes.map((a) => a.replace('::ffff:', ''))).toEqual(['127.0.0.1', '127.0.0.2']);

      remotes.length = 0;
      for (let i = 0; i < 2; i++) await egressRequest(`http://127.0.0.1:${port}/`, options());
      expect(remotes).toHaveLength(2);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('trusts exactly the listed origins', async () => {
    const policy = { allowPrivate: false, trustedOrigins: [upstream.origin] };
    expect((await egressRequest(`${upstream.origin}/a.png`, options({ policy }))).status).toBe(200);
    const otherPort = await refusal(egressRequest(`${internal.origin}/a.png`, options({ policy })));
    expect(otherPort).toMatchObject({ reason: 'forbidden_address', detail: { range: 'loopback' } });
    const otherPortTls = await refusal(egressRequest(`https://127.0.0.1:${internal.port}/a.png`, options({ policy })));
    expect(otherPortTls.reason).toBe('forbidden_address');
    const metadata = await refusal(egressRequest('http://169.254.169.254/latest/meta-data/', options({ policy })));
    expect(metadata).toMatchObject({ reason: 'forbidden_address', detail: { range: 'link_local' } });
    const publicHttp = await refusal(
      egressRequest(
        'http://cdn.kiln.test/a.png',
        options({ policy, resolve: () => Promise.resolve([{ address: '93.184.215.14', family: 4 }]) }),
      ),
    );
    expect(publicHttp.reason).toBe('not_https');
    expect(internal.seen).toHaveLength(0);
  });

  it('never follows a redirect', async () => {
    upstream.handler = (_req, res) => res.writeHead(302, { location: `${internal.origin}/secret` }).end();
    const err = await refusal(egressRequest(`${upstream.origin}/a.png`, options()));
    expect(err).toMatchObject({ reason: 'redirect', refused: true });
    expect(err.message).toBe('Redirects are not followed (302)');
    expect(internal.seen).toHaveLength(0);
  });

  it('refuses a declared Content-Length over the cap before reading the body', async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200, { 'content-length': String(300 * 1024 * 1024) });
      res.write(Buffer.alloc(1024));
    };
    const err = await refusal(egressRequest(`${upstream.origin}/big`, options({ maxBytes: 1024 * 1024 })));
    expect(err).toMatchObject({ reason: 'too_large', message: 'The answer is larger than 1 MB' });
  });

  it('abandons a streamed body at the cap, so the sender stops long before its 300 MB', async () => {
    const total = 300 * 1024 * 1024;
    let sent = 0;
    let closed!: () => void;
    const senderClosed = new Promise<void>((resolve) => (closed = resolve));
    upstream.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' }); // chunked: no length to refuse up front
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = () => {
        while (sent < total && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', closed);
      pump();
    };
    const err = await refusal(egressRequest(`${upstream.origin}/huge`, options({ maxBytes: 4 * 1024 * 1024 })));
    expect(err.reason).toBe('too_large');
    await senderClosed;
    // What the sender managed to write before the reset: the cap plus socket buffers.
    expect(sent).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses a body whose Content-Type is not acceptable, and accepts one that is', async () => {
    const acceptContentType = (ct: string | undefined) => !ct || ct.startsWith('image/');
    upstream.handler = (_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>');
    const err = await refusal(egressRequest(`${upstream.origin}/a.png`, options({ acceptContentType })));
    expect(err).toMatchObject({ reason: 'unexpected_content_type', refused: true });
    upstream.handler = (_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end('png');
    expect((await egressRequest(`${upstream.origin}/a.png`, options({ acceptContentType }))).body.toString()).toBe('png');
  });

  it('times out an answer that never comes', async () => {
    upstream.handler = () => {
      // never answers
    };
    const started = Date.now();
    const err = await refusal(egressRequest(`${upstream.origin}/slow`, options({ timeoutMs: 200 })));
    expect(err).toMatchObject({ reason: 'timeout', refused: false, message: 'No complete answer within 0.2 s' });
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('times out a body that trickles', async () => {
    upstream.handler = (_req, res) => {
      res.writeHead(200);
      const t = setInterval(() => res.write('x'), 20);
      res.on('close', () => clearInterval(t));
    };
    const err = await refusal(egressRequest(`${upstream.origin}/trickle`, options({ timeoutMs: 300 })));
    expect(err.reason).toBe('timeout');
  });

  it("rejects with the caller's own reason when the caller aborts", async () => {
    upstream.handler = () => {
      // never answers
    };
    const controller = new AbortController();
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 50);
    await expect(egressRequest(`${upstream.origin}/slow`, options({ signal: controller.signal }))).rejects.toBe(reason);
  });

  it('reports a refused connection as a network failure worth retrying', async () => {
    const closed = await local();
    await stop(closed);
    const err = await refusal(egressRequest(`${closed.origin}/`, options()));
    expect(err).toMatchObject({ reason: 'network', refused: false, detail: { code: 'ECONNREFUSED' } });
  });

  it('sends the host name as TLS SNI and verifies the certificate', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-egress-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-days',
          '1',
          '-subj',
          '/CN=images.kiln.test',
          '-keyout',
          path.join(dir, 'key.pem'),
          '-out',
          path.join(dir, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
      const sniSeen: string[] = [];
      const tls = createHttpsServer({
        key: fs.readFileSync(path.join(dir, 'key.pem')),
        cert: fs.readFileSync(path.join(dir, 'cert.pem')),
        SNICallback: (servername, done) => {
          sniSeen.push(servername);
          done(null, undefined); // the default context
        },
      });
      tls.on('tlsClientError', () => undefined);
      await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
      const port = (tls.address() as AddressInfo).port;
      try {
        const resolve: ResolveHost = () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
        const err = await refusal(egressRequest(`https://images.kiln.test:${port}/a.png`, options({ resolve })));
        // A self-signed certificate: the client refuses it, so verification is on.
        expect(err.reason).toBe('network');
        expect(err.detail.code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
        expect(sniSeen).toEqual(['images.kiln.test']);
      } finally {
        await new Promise((resolve) => tls.close(resolve));
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('checkEgressTarget', () => {
  it.each([
    ['not a url', 'bad_url'],
    ['ftp://example.com/x', 'bad_url'],
    ['file:///etc/passwd', 'bad_url'],
    ['https://user:pw@example.com/x', 'bad_url'],
  ])('%s is %s', async (url, reason) => {
    const err = await refusal(checkEgressTarget(url, ANYWHERE));
    expect(err.reason).toBe(reason);
  });

  it('says when a name does not resolve (not a refusal: it may later)', async () => {
    const err = await refusal(checkEgressTarget('https://upstream.invalid/v1', PUBLIC_ONLY));
    expect(err).toMatchObject({ reason: 'unresolvable', refused: false });
  });

  it.each(['metadata.google.internal', 'localhost.', 'api.localhost', 'printer.local', 'nas.home.arpa', 'box.localdomain'])(
    'refuses %s by name, before any lookup, unless private targets are allowed',
    async (host) => {
      let lookups = 0;
      const resolve: ResolveHost = () => {
        lookups++;
        return Promise.resolve([{ address: '1.1.1.1', family: 4 }]);
      };
      const err = await refusal(checkEgressTarget(`https://${host}/v1`, PUBLIC_ONLY, { resolve }));
      expect(err).toMatchObject({ reason: 'forbidden_address', refused: true, detail: { range: 'internal_name' } });
      expect(lookups).toBe(0);
      await expect(checkEgressTarget(`https://${host}/v1`, ANYWHERE, { resolve })).resolves.toMatchObject({ address: '1.1.1.1' });
    },
  );

  it('does not mistake a public name that merely contains those words', async () => {
    const resolve: ResolveHost = () => Promise.resolve([{ address: '1.1.1.1', family: 4 }]);
    for (const host of ['internal.example.com', 'local-images.example.com', 'mylocalhost.com'])
      await expect(checkEgressTarget(`https://${host}/v1`, PUBLIC_ONLY, { resolve })).resolves.toMatchObject({ address: '1.1.1.1' });
  });

  it('returns the address to connect to', async () => {
    const resolve: ResolveHost = () =>
      Promise.resolve([
        { address: '2606:4700:4700::1111', family: 6 },
        { address: '1.1.1.1', family: 4 },
      ]);
    await expect(checkEgressTarget('https://one.kiln.test/x', PUBLIC_ONLY, { resolve })).resolves.toMatchObject({
      address: '2606:4700:4700::1111',
      family: 6,
    });
  });
});
