import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  at: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** What the receiver does with one request: answer with a status (and headers), or never answer. */
export type Reply = { status: number; headers?: Record<string, string> } | 'hang';

/**
 * A webhook receiver on 127.0.0.1: records every request and answers as `reply` says (204 by
 * default). Hanging requests are closed by close().
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  reply: (req: ReceivedWebhook, index: number) => Reply = () => ({ status: 204 });
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const hook = { at: Date.now(), path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      this.received.push(hook);
      const r = this.reply(hook, this.received.length - 1);
      if (r === 'hang') return;
      res.writeHead(r.status, r.headers);
      res.end();
    });
  });
  private readonly sockets = new Set<import('node:net').Socket>();

  async listen(): Promise<this> {
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  /** Received requests whose body is of this event type. */
  ofType(type: string): ReceivedWebhook[] {
    return this.received.filter((r) => JSON.parse(r.body).type === type);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
