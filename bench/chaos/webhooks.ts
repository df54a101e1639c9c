import { createHash } from 'node:crypto';
import * as http from 'node:http';
import type { Socket } from 'node:net';
import { Pool } from 'pg';
import { BenchAccount } from '../lib/kiln';
import { InvariantResult } from './invariants';

/** What the chaos run's endpoints subscribe to: one event per batch and one per failed task. */
export const CHAOS_WEBHOOK_EVENTS = ['batch.completed', 'task.failed'];

/**
 * The chaos run's webhook receiver on 127.0.0.1: answers 204 and records every delivery by
 * its webhook-id (with a digest of each body received under it). kill() closes it and every
 * open connection, as a crashed receiver would; start() brings it back on the same port.
 */
export class ChaosReceiver {
  /** webhook-id -> digests of the bodies received under it. */
  readonly received = new Map<string, Set<string>>();
  /** batch id -> webhook-ids of the batch.completed events received for it. */
  readonly completions = new Map<string, Set<string>>();
  requests = 0;
  killedFor: { at: number; ms: number } | null = null;
  private server: http.Server | null = null;
  private readonly sockets = new Set<Socket>();

  constructor(readonly port: number) {}

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  async start(): Promise<void> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests += 1;
        const body = Buffer.concat(chunks).toString('utf8');
        const id = String(req.headers['webhook-id'] ?? '');
        const digests = this.received.get(id) ?? new Set<string>();
        digests.add(createHash('sha256').update(body).digest('hex'));
        this.received.set(id, digests);
        try {
          const event = JSON.parse(body) as { type: string; data: { id?: string } };
          if (event.type === 'batch.completed' && event.data.id) {
            const ids = this.completions.get(event.data.id) ?? new Set<string>();
            ids.add(id);
            this.completions.set(event.data.id, ids);
          }
        } catch {
          // Not JSON: counted by the invariants as a body that does not match.
        }
        res.writeHead(204).end();
      });
    });
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.server = server;
  }

  /** Gone for `ms` (connections refused, those open cut), then back. */
  async killFor(ms: number): Promise<void> {
    this.killedFor = { at: Date.now(), ms };
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server?.close(() => resolve()) ?? resolve());
    await new Promise((r) => setTimeout(r, ms));
    await this.start();
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
    this.server = null;
  }
}

/** Registers an endpoint on each account, pointing at the receiver. */
export async function registerEndpoints(baseUrl: string, accounts: BenchAccount[], receiver: ChaosReceiver): Promise<void> {
  for (const a of accounts) {
    const res = await fetch(`${baseUrl}/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url(`/${a.id}`), events: CHAOS_WEBHOOK_EVENTS }),
    });
    if (res.status !== 201) throw new Error(`POST /v1/webhooks: ${res.status} ${await res.text()}`);
  }
}

/** Deliveries not yet settled (pending), to wait for before the checks. */
export async function pendingDeliveries(db: Pool): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'pending'`);
  return rows[0].n;
}

/**
 * No event lost, duplicates only with the same webhook-id: every finished batch of a
 * subscribed account has one batch.completed event, every delivery row was delivered (none
 * failed or left pending) and reached the receiver, a webhook-id always carried the same
 * body, and no batch's completion came under two webhook-ids.
 */
export async function webhookInvariants(db: Pool, receiver: ChaosReceiver, accounts: BenchAccount[]): Promise<InvariantResult[]> {
  const ids = accounts.map((a) => a.id);
  const missingEvents = await db.query(
    `SELECT b.id FROM batches b
      WHERE b.account_id = ANY($1::uuid[]) AND b.finished_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.account_id = b.account_id AND d.type = 'batch.completed'
                          AND d.body::jsonb -> 'data' ->> 'id' = b.id::text)`,
    [ids],
  );
  const unsettled = await db.query<{ event_id: string; type: string; status: string; attempts: number; last_error: string | null }>(
    `SELECT event_id, type, status, attempts, last_error FROM webhook_deliveries WHERE account_id = ANY($1::uuid[]) AND status <> 'delivered'`,
    [ids],
  );
  const delivered = await db.query<{ event_id: string }>(
    `SELECT event_id FROM webhook_deliveries WHERE account_id = ANY($1::uuid[]) AND status = 'delivered'`,
    [ids],
  );
  const notReceived = delivered.rows.filter((r) => !receiver.received.has(r.event_id));
  const changedBody = [...receiver.received].filter(([, digests]) => digests.size !== 1).map(([id]) => id);
  const twoIds = [...receiver.completions].filter(([, hooks]) => hooks.size !== 1).map(([batch, hooks]) => ({ batch, hooks: [...hooks] }));
  return [
    {
      name: 'webhooks: every completion written',
      rule: 'every finished batch of an account with an endpoint has its batch.completed delivery in the outbox',
      violations: missingEvents.rows.length,
      examples: missingEvents.rows.slice(0, 5),
    },
    {
      name: 'webhooks: no event lost',
      rule: 'every delivery was delivered (none failed or pending once settled) and reached the receiver, across its kill and restart',
      violations: unsettled.rows.length + notReceived.length,
      examples: [...unsettled.rows.slice(0, 3), ...notReceived.slice(0, 2)],
    },
    {
      name: 'webhooks: duplicates only as the same event',
      rule: 'a webhook-id received more than once always carried the same body, and no batch completed under two webhook-ids',
      violations: changedBody.length + twoIds.length,
      examples: [...changedBody.slice(0, 3), ...twoIds.slice(0, 2)],
    },
  ];
}
