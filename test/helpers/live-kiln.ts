import { TestingModule } from '@nestjs/testing';
import * as net from 'node:net';
import { ConfigOverrides, fileEnvironment, FileEnvironment, TestApp } from '@app/testing';
import { bootApi, bootGenerator } from './apps';

/**
 * A Kiln reachable over real HTTP, as the SDK and the CLI use it: the api listening on a port
 * of 127.0.0.1 (PUBLIC_BASE_URL pointing at it, so result URLs download), and a generator
 * consuming its queue, on a database of the file's own.
 */
export interface LiveKiln {
  env: FileEnvironment;
  api: TestApp;
  generator: TestingModule;
  url: string;
  close: () => Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export async function startLiveKiln(name: string, overrides: ConfigOverrides = {}): Promise<LiveKiln> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // Stripe Checkout sends the buyer back to this Kiln, whose port is only known here.
  const stripe = overrides.stripe && { ...overrides.stripe, returnUrlBase: `${url}/app/credits` };
  const env = await fileEnvironment(name, {
    ...overrides,
    ...(stripe ? { stripe } : {}),
    publicBaseUrl: url,
    generator: { concurrency: 4, ...overrides.generator },
  });
  const api = await bootApi(env.config);
  await api.app.listen(port, '127.0.0.1');
  const generator = await bootGenerator(env.config);
  return {
    env,
    api,
    generator,
    url,
    close: async () => {
      await generator.close();
      await api.close();
      await env.teardown();
    },
  };
}

/**
 * A TCP proxy in front of `target` that can drop the answer to one request: the request
 * reaches the server in full, then the client's connection is cut before any byte of the
 * answer arrives, as when a network fails between a server's commit and its client.
 */
export class DroppingProxy {
  private server: net.Server;
  private dropNext: RegExp | null = null;
  readonly sockets = new Set<net.Socket>();
  dropped = 0;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.handle(client));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
    return `http://127.0.0.1:${this.port}`;
  }

  /** The next request whose first line matches loses its answer. */
  dropAnswerTo(requestLine: RegExp): void {
    this.dropNext = requestLine;
  }

  private handle(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    this.sockets.add(client).add(upstream);
    let dropping = false;
    client.on('data', (chunk) => {
      if (this.dropNext && this.dropNext.test(chunk.toString('latin1').split('\r\n')[0])) {
        this.dropNext = null;
        dropping = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (dropping) {
        this.dropped++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
