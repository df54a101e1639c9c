import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EgressError } from './egress.errors';
import { egressStream } from './egress-stream';

let server: Server;
let origin: string;
let handler: (req: IncomingMessage, res: ServerResponse) => void;
const open = new Set<ServerResponse>();

beforeAll(async () => {
  server = createServer((req, res) => {
    open.add(res);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(() => {
  for (const res of open) res.destroy();
  open.clear();
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const ANYWHERE = { allowPrivate: true };

async function failure(p: Promise<unknown>): Promise<EgressError> {
  const err = await p.then(
    () => {
      throw new Error('expected a failure');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EgressError);
  return err as EgressError;
}

describe('egressStream', () => {
  it('answers once the headers arrive and yields the body as it comes, before it is complete', async () => {
    let finish: () => void = () => undefined;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first\n');
      finish = () => res.end('second\n');
    };
    const stream = await egressStream(`${origin}/file`, { policy: ANYWHERE, timeoutMs: 2000, maxBytes: 1024 });
    expect(stream.status).toBe(200);
    const it = stream.chunks();
    expect((await it.next()).value?.toString()).toBe('first\n');
    finish();
    const rest: string[] = [];
    for (let n = await it.next(); !n.done; n = await it.next()) rest.push(n.value.toString());
    expect(rest.join('')).toBe('second\n');
  });

  it('refuses a private address under a public-only policy, and a redirect', async () => {
    expect(
      (await failure(egressStream(`https://127.0.0.1:1/x`, { policy: { allowPrivate: false }, timeoutMs: 1000, maxBytes: 10 }))).reason,
    ).toBe('forbidden_address');
    handler = (_req, res) => res.writeHead(302, { location: 'http://169.254.169.254/' }).end();
    expect((await failure(egressStream(`${origin}/r`, { policy: ANYWHERE, timeoutMs: 1000, maxBytes: 10 }))).reason).toBe('redirect');
  });

  it('no headers within timeoutMs: timeout; a stall while the reader waits: timeout', async () => {
    handler = () => undefined;
    expect((await failure(egressStream(`${origin}/hang`, { policy: ANYWHERE, timeoutMs: 200, maxBytes: 10 }))).reason).toBe('timeout');
    handler = (_req, res) => {
      res.writeHead(200);
      res.write('x');
    };
    const stream = await egressStream(`${origin}/stall`, { policy: ANYWHERE, timeoutMs: 2000, idleTimeoutMs: 200, maxBytes: 10 });
    const it = stream.chunks();
    await it.next();
    expect((await failure(it.next())).reason).toBe('timeout');
  });

  it('a body over maxBytes fails (declared at once, streamed when it passes the cap)', async () => {
    handler = (_req, res) => res.writeHead(200, { 'content-length': '100' }).end('x'.repeat(100));
    expect((await failure(egressStream(`${origin}/big`, { policy: ANYWHERE, timeoutMs: 1000, maxBytes: 10 }))).reason).toBe('too_large');
    handler = (_req, res) => {
      res.writeHead(200);
      res.write('x'.repeat(8));
      setTimeout(() => res.end('y'.repeat(8)), 20);
    };
    const stream = await egressStream(`${origin}/grows`, { policy: ANYWHERE, timeoutMs: 1000, maxBytes: 10 });
    const err = await failure(
      (async () => {
        for await (const _ of stream.chunks()) void _;
      })(),
    );
    expect(err.reason).toBe('too_large');
  });

  it("the caller's abort rejects with its own reason", async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      res.write('x');
    };
    const controller = new AbortController();
    const stream = await egressStream(`${origin}/abort`, { policy: ANYWHERE, timeoutMs: 2000, maxBytes: 10, signal: controller.signal });
    const it = stream.chunks();
    await it.next();
    const pending = it.next();
    controller.abort(new Error('shutting down'));
    await expect(pending).rejects.toThrow('shutting down');
  });
});
