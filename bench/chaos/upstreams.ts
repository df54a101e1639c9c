import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'pg';
// The fakes alone, not @app/testing's whole index (its e2e harness has no business in the bench's process).
import {
  FakeQueueUpstream,
  fakeQueueUpstream,
  OpenAiBatchFakeUpstream,
  OpenAiFakeUpstream,
  QUEUE_DIALECTS,
  QueueTypeName,
  StripeFake,
} from '../../libs/testing/src/fakes';
import { BenchAccount, KilnStack } from '../lib/kiln';
import { sleep } from '../lib/util';
import { InvariantResult } from './invariants';

/**
 * `npm run chaos -- --upstreams` (CHAOS_UPSTREAMS=1): the upstream paths under the same faults.
 * Models are routed to fake upstreams on 127.0.0.1 in the runner's process: fal, Replicate and
 * BFL queues each behind a fault proxy (submits held 2-5 s after the upstream took them, 503
 * bursts, a few hung submits), the OpenAI images API behind the OpenAI door
 * (/v1/images/generations), the OpenAI Batch API for the economy tier, and Stripe for credit
 * purchases whose events are delivered (twice, to both apis, retried until answered) while
 * the faults run. Counted on the fakes: submits per task per route, batch lines per task,
 * credits per payment session.
 */

/** Models of the seeded catalog given to the upstream paths (the simulated route keeps eta-image). */
export const QUEUE_MODELS: Record<QueueTypeName, string> = { fal: 'alpha-image-2', replicate: 'alpha-image-2-5', bfl: 'zeta-image-2-1' };
export const DOOR_MODEL = 'zeta-image-3';
export const ECONOMY_MODEL = 'zeta-image-3-pro';
const QUEUE_PRESETS: Record<QueueTypeName, string> = {
  fal: 'fal/fal-ai/flux/schnell',
  replicate: 'replicate/black-forest-labs/flux-schnell',
  bfl: 'bfl/flux-pro-1.1',
};

/** Share of submits whose answer the proxy holds after the upstream took them: the window a crash leaves. */
const HELD_SHARE = 0.15;
const HELD_MS = { min: 2000, max: 5000 };
/** Share of submits the proxy never forwards nor answers (the route's timeout ends them). */
const HANG_SHARE = 0.01;
/** A 503 burst on every route this often, this long: every request answered 503 unforwarded. */
const BURST_EVERY_MS = 25_000;
const BURST_MS = 3000;
const QUEUE_MS = 1500;
/** The OpenAI door's requests, one at a time, this far apart (each a 2-image batch waited for). */
const DOOR_EVERY_MS = 2000;
const STRIPE_WEBHOOK_SECRET = 'whsec_kiln_chaos';
/** The route's timeout on a submit that never answers. */
const ROUTE_TIMEOUT_MS = 8000;

/** A model's routes, in order (one, or a chain that fails over). */
export type RouteChain = { label: string; route: Record<string, unknown> }[];

interface SubmitRecord {
  route: string;
  prompt: string;
  seed: number | null;
  sentAt: number;
  answeredAt: number | null;
  /** When the generator hung up before the answer (its route's timeout): the submit it left in doubt. */
  abandonedAt: number | null;
  held: boolean;
}

/**
 * A queue fake behind a proxy of the run's own: forwards to the fake, answers 503 for a whole
 * burst without forwarding, holds some submit answers after the fake took them, and never
 * forwards a few submits. Records every submit the fake accepted, with when it was sent and
 * answered (null: the generator hung up or died before the answer).
 */
class FaultProxy {
  readonly fake: FakeQueueUpstream;
  readonly submits: SubmitRecord[] = [];
  held = 0;
  hung = 0;
  refused503 = 0;
  private server: http.Server;
  private root = '';
  private burstUntil = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly type: QueueTypeName) {
    this.fake = fakeQueueUpstream(type, { queueMs: QUEUE_MS });
    this.fake.recordBodies = false;
    this.server = http.createServer((req, res) => void this.handle(req, res).catch(() => res.destroy()));
  }

  get baseUrl(): string {
    return QUEUE_DIALECTS[this.type].baseUrl(this.root);
  }

  async start(): Promise<void> {
    await this.fake.start();
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.root = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    // The bursts of the three routes are offset from one another.
    const offset = Object.keys(QUEUE_MODELS).indexOf(this.type) * 7000;
    const burst = () => {
      this.burstUntil = Date.now() + BURST_MS;
      this.timer = setTimeout(burst, BURST_EVERY_MS);
    };
    this.timer = setTimeout(burst, BURST_EVERY_MS / 2 + offset);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
    await this.fake.stop();
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (Date.now() < this.burstUntil) {
      this.refused503 += 1;
      res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Service Unavailable' }));
      return;
    }
    const url = new URL(req.url ?? '/', this.root);
    const dialect = QUEUE_DIALECTS[this.type];
    const isSubmit = req.method === 'POST' && dialect.isSubmit(url.pathname);
    if (isSubmit && Math.random() < HANG_SHARE) {
      this.hung += 1;
      return; // never forwarded, never answered
    }
    const sentAt = Date.now();
    let upstream: Response;
    try {
      upstream = await fetch(`${this.fake.root}${url.pathname}${url.search}`, {
        method: req.method,
        headers: Object.fromEntries(
          Object.entries(req.headers).filter(([k]) => !['host', 'content-length', 'connection'].includes(k)),
        ) as Record<string, string>,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
      });
    } catch {
      res.destroy();
      return;
    }
    let answer = Buffer.from(await upstream.arrayBuffer());
    // The fake's answers name its own address (status, result and image URLs): they are
    // rewritten to the proxy's, so polls and downloads meet the bursts too.
    if ((upstream.headers.get('content-type') ?? '').includes('json'))
      answer = Buffer.from(answer.toString('utf8').split(this.fake.root).join(this.root));
    let record: SubmitRecord | null = null;
    if (isSubmit && upstream.ok) {
      let parsed: Record<string, unknown> | null;
      try {
        parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      } catch {
        parsed = null;
      }
      const input = dialect.inputOf(parsed);
      record = {
        route: this.type,
        prompt: typeof input.prompt === 'string' ? input.prompt : '',
        seed: typeof input.seed === 'number' ? input.seed : null,
        sentAt,
        answeredAt: null,
        abandonedAt: null,
        held: false,
      };
      this.submits.push(record);
      if (Math.random() < HELD_SHARE) {
        record.held = true;
        this.held += 1;
        await sleep(HELD_MS.min + Math.random() * (HELD_MS.max - HELD_MS.min));
      }
    }
    if (res.destroyed || req.socket.destroyed) {
      if (record) record.abandonedAt = Date.now();
      return;
    }
    const headers: Record<string, string> = {};
    upstream.headers.forEach((v, k) => {
      if (!['content-length', 'transfer-encoding', 'connection', 'content-encoding'].includes(k)) headers[k] = v;
    });
    res.writeHead(upstream.status, headers).end(answer, () => {
      if (record) record.answeredAt = Date.now();
    });
  }
}

/** One purchase's delivery of its checkout.session.completed events. */
interface Purchase {
  sessionId: string;
  accountId: string;
  credits: number;
  /** Deliveries answered 2xx (sent twice, to both apis, each retried until answered). */
  delivered: number;
}

export class ChaosUpstreams {
  readonly proxies = (Object.keys(QUEUE_MODELS) as QueueTypeName[]).map((t) => new FaultProxy(t));
  readonly door = new OpenAiFakeUpstream();
  readonly economy = new OpenAiBatchFakeUpstream({ completeAfterMs: 4000, imageScale: 16 });
  readonly stripe = new StripeFake();
  readonly purchases: Purchase[] = [];
  doorRequests = 0;
  doorOk = 0;
  private packId = '';

  async start(): Promise<void> {
    for (const p of this.proxies) await p.start();
    await this.door.start();
    await this.economy.start();
    await this.stripe.start();
  }

  async stop(): Promise<void> {
    for (const p of this.proxies) await p.stop().catch(() => undefined);
    await this.door.stop().catch(() => undefined);
    await this.economy.stop().catch(() => undefined);
    await this.stripe.stop().catch(() => undefined);
  }

  /** What every Kiln process needs: the fakes' keys and Stripe pointed at its fake. */
  env(): Record<string, string> {
    return {
      FAL_KEY: 'chaos-fal-key',
      REPLICATE_API_TOKEN: 'chaos-replicate-token',
      BFL_API_KEY: 'chaos-bfl-key',
      OPENAI_API_KEY: 'sk-chaos-fake',
      STRIPE_SECRET_KEY: 'sk_test_kiln_chaos',
      STRIPE_WEBHOOK_SECRET,
      STRIPE_API_BASE: this.stripe.apiBase,
      STRIPE_TIMEOUT_MS: '5000',
    };
  }

  /**
   * The routes of each upstream model: fal's model rides on a chain, fal then Replicate
   * (failover with its defaults: a 503 burst or a hung submit on fal moves the task to
   * Replicate, and fal's circuit opens), so the submit invariant, which counts per route,
   * covers tasks moving between routes under the faults; the other models have one route.
   */
  chains(): Record<string, RouteChain> {
    const chains: Record<string, RouteChain> = {};
    const routeOf = (p: FaultProxy) => ({
      label: p.type,
      route: { preset: QUEUE_PRESETS[p.type], baseUrl: p.baseUrl, pollIntervalMs: 500, timeoutMs: ROUTE_TIMEOUT_MS },
    });
    for (const p of this.proxies) chains[QUEUE_MODELS[p.type]] = [routeOf(p)];
    const replicate = this.proxies.find((p) => p.type === 'replicate')!;
    chains[QUEUE_MODELS.fal].push(routeOf(replicate));
    chains[DOOR_MODEL] = [{ label: 'openai', route: { type: 'openai', baseUrl: this.door.baseUrl, model: 'compatible-image-1' } }];
    return chains;
  }

  async route(stack: KilnStack): Promise<void> {
    for (const [model, chain] of Object.entries(this.chains())) {
      if (chain.length === 1) await stack.routeModel(model, chain[0].route);
      else await stack.admin('PATCH', `/models/${model}`, { routes: chain.map((c) => c.route), enabled: true });
    }
    await stack.admin('PATCH', '/plans/scale', { maxConcurrentEconomyBatches: 1000 });
    await stack.admin('PATCH', `/models/${ECONOMY_MODEL}`, {
      provider: {
        type: 'openai',
        baseUrl: this.economy.baseUrl,
        model: 'compatible-image-1',
        batch: { enabled: true, collectMs: 1000, maxRequests: 200, pollIntervalMs: 1000 },
      },
      enabled: true,
      economyCreditCost: { '1K': 1 },
      economyWindowHours: 24,
    });
    const { pack } = await stack.admin<{ pack: { id: string } }>('POST', '/credit-packs', {
      credits: 500,
      priceCents: 500,
      currency: 'USD',
    });
    this.packId = pack.id;
  }

  /**
   * Loops beside the batch clients while the faults run: the OpenAI door (one request at a
   * time, each a small batch waited for) and credit purchases (a checkout, the buyer pays, the
   * event delivered twice, to both apis, each retried until answered as Stripe retries).
   */
  loops(stack: KilnStack, baseUrls: string[], account: BenchAccount, stopped: () => boolean): Promise<void>[] {
    return [this.doorLoop(baseUrls, account, stopped), this.purchaseLoop(stack, baseUrls, stopped)];
  }

  private async doorLoop(baseUrls: string[], account: BenchAccount, stopped: () => boolean): Promise<void> {
    let n = 0;
    while (!stopped()) {
      n += 1;
      this.doorRequests += 1;
      try {
        const res = await fetch(`${baseUrls[n % baseUrls.length]}/v1/images/generations`, {
          method: 'POST',
          headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: DOOR_MODEL, prompt: `chaos door ${n}: a kiln at dawn`, n: 2, size: '1024x1024' }),
          signal: AbortSignal.timeout(60_000),
        });
        const body = (await res.json().catch(() => null)) as { data?: unknown[] } | null;
        if (res.ok && body?.data?.length === 2) this.doorOk += 1;
      } catch {
        // A fault: the next request tries again.
      }
      await sleep(DOOR_EVERY_MS);
    }
  }

  private async purchaseLoop(stack: KilnStack, baseUrls: string[], stopped: () => boolean): Promise<void> {
    let n = 0;
    while (!stopped()) {
      await sleep(3000);
      n += 1;
      try {
        await this.purchase(stack, baseUrls, n);
      } catch {
        // PostgreSQL or the api down mid-checkout: no session, nothing to count.
      }
    }
    // Every paid session's event is delivered before the invariants are read.
    await Promise.all(this.pendingDeliveries);
  }

  private readonly pendingDeliveries = new Set<Promise<void>>();

  private async purchase(stack: KilnStack, baseUrls: string[], n: number): Promise<void> {
    const email = `chaos-buyer-${n}@bench.kiln.local`;
    const password = 'chaos-buyer-password';
    const { account } = await stack.admin<{ account: { id: string } }>('POST', '/accounts', { email, password, plan: 'scale', credits: 0 });
    const base = baseUrls[n % baseUrls.length];
    const login = await fetch(`${base}/v1/dashboard/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password }),
      signal: AbortSignal.timeout(15_000),
    });
    if (!login.ok) return;
    const { token } = (await login.json()) as { token: string };
    const checkout = await fetch(`${base}/v1/dashboard/checkout`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ packId: this.packId }),
      signal: AbortSignal.timeout(15_000),
    });
    if (!checkout.ok) return;
    const { sessionId } = (await checkout.json()) as { sessionId: string };
    this.stripe.pay(sessionId);
    const purchase: Purchase = { sessionId, accountId: account.id, credits: 500, delivered: 0 };
    this.purchases.push(purchase);
    for (const url of baseUrls) {
      const p = this.deliver(url, purchase);
      this.pendingDeliveries.add(p);
      void p.finally(() => this.pendingDeliveries.delete(p));
    }
  }

  /** Stripe's retries, compressed: until a 2xx, every 2 s, for up to 3 minutes. */
  private async deliver(base: string, purchase: Purchase): Promise<void> {
    const payload = this.stripe.sessionEvent('checkout.session.completed', purchase.sessionId);
    const deadline = Date.now() + 180_000;
    while (Date.now() < deadline) {
      try {
        const res = await fetch(`${base}/v1/stripe/webhook`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json; charset=utf-8',
            'stripe-signature': this.stripe.sign(payload, STRIPE_WEBHOOK_SECRET),
          },
          body: payload,
          signal: AbortSignal.timeout(15_000),
        });
        if (res.ok) {
          purchase.delivered += 1;
          return;
        }
      } catch {
        // No answer: Stripe sends it again.
      }
      await sleep(2000);
    }
  }

  /** Totals for the report. */
  summary(): string {
    const submits = this.proxies.map((p) => `${p.type} ${p.submits.length} (${p.held} held, ${p.hung} hung, ${p.refused503} answered 503)`);
    const lines = [...this.economy.submissions.values()].reduce((a, b) => a + b, 0);
    return (
      `Upstreams: submits accepted ${submits.join(', ')}; economy: ${this.economy.batches.size} upstream batches, ${lines} lines; ` +
      `OpenAI door: ${this.doorRequests} requests, ${this.doorOk} answered with their images; ` +
      `Stripe: ${this.purchases.length} sessions paid, ${this.purchases.reduce((s, p) => s + p.delivered, 0)} deliveries answered 2xx.`
    );
  }

  /**
   * The upstream invariants. `kills`: when generators were killed (SIGKILL or SIGTERM). A
   * second submit of a task is the documented window of a route that cannot look a submit in
   * doubt up (fal, BFL: onUnknownSubmit resubmit, docs/providers.md) when every earlier submit
   * was in flight at a kill, or was abandoned by the generator before its answer (the route's
   * timeout: the upstream may have taken it): reported apart, with its task id and why, not a
   * violation. Any other second submit is a violation, listed with its submits' times.
   */
  async invariants(
    db: Pool,
    kills: number[],
  ): Promise<{
    results: InvariantResult[];
    crashWindow: { route: string; taskId: string; submits: number; why: string }[];
    /** The chain's tasks by the route they ended on (index 0: fal, 1: Replicate). */
    chainRoutes: { routeIndex: number; status: string; tasks: number }[];
  }> {
    const violations: {
      route: string;
      taskId: string | null;
      prompt: string;
      seed: number | null;
      submits: { sent: string; answered: string | null; abandoned: string | null; held: boolean }[];
    }[] = [];
    const crashWindow: { route: string; taskId: string; submits: number; why: string }[] = [];
    const at = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString().slice(11, 23));
    for (const p of this.proxies) {
      const byTask = new Map<string, SubmitRecord[]>();
      for (const s of p.submits) {
        const key = `${s.prompt}\u0000${s.seed}`;
        byTask.set(key, [...(byTask.get(key) ?? []), s]);
      }
      for (const records of byTask.values()) {
        if (records.length <= 1) continue;
        const { prompt, seed } = records[0];
        const { rows } = await db.query<{ id: string }>(`SELECT id FROM tasks WHERE prompt = $1 AND seed = $2`, [prompt, seed]);
        const taskId = rows[0]?.id ?? null;
        // Why each submit but the last was left in doubt: in flight at a kill, or given up by the generator.
        const whys = records
          .slice(0, -1)
          .map((r) =>
            kills.some((k) => k >= r.sentAt && (r.answeredAt === null || k <= r.answeredAt + 1000))
              ? 'kill'
              : r.abandonedAt !== null
                ? 'timeout'
                : null,
          );
        if (taskId && whys.every((w) => w !== null))
          crashWindow.push({ route: p.type, taskId, submits: records.length, why: [...new Set(whys)].join('+') });
        else
          violations.push({
            route: p.type,
            taskId,
            prompt,
            seed,
            submits: records.map((r) => ({ sent: at(r.sentAt)!, answered: at(r.answeredAt), abandoned: at(r.abandonedAt), held: r.held })),
          });
      }
    }
    const lines = [...this.economy.submissions].filter(([, n]) => n !== 1).map(([taskId, n]) => ({ taskId, lines: n }));
    const { rows: economyMissing } = await db.query<{ id: string }>(
      `SELECT t.id FROM tasks t JOIN batches b ON b.id = t.batch_id
        WHERE b.tier = 'economy' AND t.status = 'succeeded' AND NOT (t.id = ANY($1::uuid[]))`,
      [[...this.economy.submissions.keys()]],
    );
    const { rows: credits } = await db.query<{
      session: string;
      account_id: string;
      purchases: number;
      ledger: number;
      credits: string | null;
    }>(
      `SELECT s.session, s.account_id,
              (SELECT count(*)::int FROM credit_purchases p WHERE p.checkout_session_id = s.session) AS purchases,
              (SELECT count(*)::int FROM ledger_entries l WHERE l.account_id = s.account_id AND l.kind = 'purchase') AS ledger,
              (SELECT sum(amount)::text FROM ledger_entries l WHERE l.account_id = s.account_id AND l.kind = 'purchase') AS credits
         FROM unnest($1::text[], $2::uuid[]) AS s(session, account_id)`,
      [this.purchases.map((p) => p.sessionId), this.purchases.map((p) => p.accountId)],
    );
    const delivered = new Map(this.purchases.map((p) => [p.sessionId, p]));
    const creditProblems = credits.filter((c) => {
      const p = delivered.get(c.session)!;
      // Each buyer has one session: one purchase row and one purchase ledger row of the pack's credits once delivered, none otherwise.
      const want = p.delivered > 0 ? 1 : 0;
      return c.purchases !== want || c.ledger !== want || (want === 1 && Number(c.credits) !== p.credits);
    });
    const { rows: chainRoutes } = await db.query<{ routeIndex: number; status: string; tasks: number }>(
      `SELECT t.route_index AS "routeIndex", t.status, count(*)::int AS tasks
         FROM tasks t JOIN batches b ON b.id = t.batch_id
        WHERE b.model = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
      [QUEUE_MODELS.fal],
    );
    return {
      crashWindow,
      chainRoutes,
      results: [
        {
          name: 'one submit per task per route',
          rule: 'each task was accepted by each queue upstream (fal, Replicate, BFL fakes) once; a second submit after one in flight at a kill or given up at the route timeout is listed apart (the documented window)',
          violations: violations.length,
          examples: violations.slice(0, 5),
        },
        {
          name: 'one batch line per task',
          rule: 'each economy task went into the upstream batches (OpenAI Batch API fake) as exactly one line, and every economy task that succeeded went in',
          violations: lines.length + economyMissing.length,
          examples: [...lines.slice(0, 5), ...economyMissing.slice(0, 5)],
        },
        {
          name: 'one credit per payment session',
          rule: "each paid Checkout session whose event was answered 2xx is one credit_purchases row and one purchase ledger row of its pack's credits, however often delivered",
          violations: creditProblems.length,
          examples: creditProblems.slice(0, 5),
        },
      ],
    };
  }
}
