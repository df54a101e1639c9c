import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A spec's own stand-in HTTP service on 127.0.0.1 (an upstream, an internal address the
 * generator must not reach): `handle` answers each request, `base` is its origin once
 * started, and stop() closes its open connections too.
 */
export abstract class LocalServer {
  base = '';
  private readonly server = http.createServer((req, res) => void this.handle(req, res));

  protected abstract handle(req: http.IncomingMessage, res: http.ServerResponse): void | Promise<void>;

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
