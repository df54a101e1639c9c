import { buildConfig, KilnConfig } from '@app/config';
import { SecretBox, WebhookSender } from '@app/webhooks';
import { bearer, FileEnvironment, fileEnvironment, TestAccount, TestApp, waitFor } from '@app/testing';
import { bootApi } from './helpers/apps';
import { WebhookReceiver } from './helpers/webhook-receiver';

jest.setTimeout(180_000);

/** Long enough that a hanging attempt holds its slot for the whole measurement. */
const TIMEOUT_MS = 8000;
const PINGS = 8;

/**
 * An api to register endpoints, a sender driven by the test (no renders in the way), and a
 * receiver on 127.0.0.1 where every path under /dead hangs. The defaults for the slots (50 in
 * flight, 8 per endpoint, the account share); circuits that never open and retries far off,
 * so hanging endpoints keep hanging throughout.
 */
function harness(name: string, pollIntervalMs: number) {
  const h = {} as { env: FileEnvironment; api: TestApp; sender: WebhookSender; receiver: WebhookReceiver };
  beforeAll(async () => {
    const webhooks: KilnConfig['webhooks'] = {
      ...buildConfig(process.env).webhooks,
      allowPrivate: true,
      pollIntervalMs,
      timeoutMs: TIMEOUT_MS,
      retryDelaysMs: [60_000],
      circuitFailures: 100_000,
    };
    h.env = await fileEnvironment(name, { webhooks });
    h.api = await bootApi(h.env.config);
    h.sender = new WebhookSender(h.api.db, h.env.config, new SecretBox(h.env.config.webhooks.secretKey));
    h.receiver = await new WebhookReceiver().listen();
    h.receiver.reply = (req) => (req.path.startsWith('/dead') ? 'hang' : { status: 204 });
    await h.sender.start();
  });
  afterAll(async () => {
    await h.sender?.stop();
    await h.api?.close();
    await h.receiver?.close();
    await h.env?.teardown();
  });
  const as = (a: TestAccount, method: 'get' | 'post', path: string) => h.api.http[method](`/v1${path}`).set('Authorization', bearer(a));
  const register = async (a: TestAccount, path: string): Promise<string> =>
    (
      await as(a, 'post', '/webhooks')
        .send({ url: h.receiver.url(path), events: ['ping'] })
        .expect(201)
    ).body.endpoint.id;
  /** `count` deliveries due now (or a minute ago) for the endpoint. */
  const backlog = (a: TestAccount, endpointId: string, tag: string, count: number, ago = '0') =>
    h.api.db.query(
      `INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, type, body, next_attempt_at)
       SELECT 'evt_' || $3 || '_' || g, $1, $2, 'ping', '{}', now() - $5::interval FROM generate_series(1, $4::int) AS g`,
      [endpointId, a.id, tag, count, ago],
    );
  /** An account with its allowed maximum of endpoints, each never answering, each with a backlog due. */
  const greedyAccount = async (): Promise<void> => {
    const greedy = await h.api.account();
    for (let i = 1; i <= 10; i++) await backlog(greedy, await register(greedy, `/dead/${i}`), `dead_${i}`, 40, '1 minute');
    await waitFor('the hanging endpoints to hold attempts', () => hanging() >= 10);
    await new Promise((r) => setTimeout(r, 300));
  };
  const hanging = () => h.receiver.received.filter((r) => r.path.startsWith('/dead')).length;
  return { h, as, register, backlog, greedyAccount, hanging };
}

describe('webhook delivery: one account with 10 hanging endpoints keeps within its share of the slots', () => {
  const { h, as, register, backlog, greedyAccount, hanging } = harness('webhooks_fair_share', 50);

  /** Lags (ms) of `PINGS` test pings to the endpoint, one after the other, each from its request to its arrival. */
  async function pingLags(a: TestAccount, endpointId: string, path: string): Promise<number[]> {
    const lags: number[] = [];
    for (let i = 0; i < PINGS; i++) {
      const ping = await as(a, 'post', `/webhooks/${endpointId}/test`).expect(202);
      const sentAt = Date.now();
      const hook = await waitFor(
        `ping ${i}`,
        () => h.receiver.received.find((r) => r.path === path && r.headers['webhook-id'] === ping.body.delivery.id),
        3 * TIMEOUT_MS,
        20,
      );
      lags.push(hook.at - sentAt);
      await new Promise((r) => setTimeout(r, 100));
    }
    return lags;
  }

  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

  it("another account's deliveries keep their baseline lag", async () => {
    const healthy = await h.api.account();
    const endpoint = await register(healthy, '/healthy');
    const baseline = await pingLags(healthy, endpoint, '/healthy');

    await greedyAccount();
    const held = hanging();
    const contended = await pingLags(healthy, endpoint, '/healthy');

    // Before the share, the greedy account held all 50 slots and the first ping was not
    // delivered within 24 s. The bounds leave a loaded machine ample room and stay far below that.
    expect(Math.max(...contended)).toBeLessThan(TIMEOUT_MS / 2);
    expect(median(contended)).toBeLessThanOrEqual(2 * median(baseline) + 250);
    // The greedy account holds its share, the default 16 (two endpoints' worth), not every slot.
    expect(held).toBeLessThanOrEqual(16);
  });

  it("another account's backlog, however long, does not sit ahead of a single delivery", async () => {
    // 10 endpoints that answer at once, with 20,000 deliveries due before the ping: oldest
    // first, the ping waited for most of them (6-10 s here).
    const busy = await h.api.account();
    for (let i = 1; i <= 10; i++) await backlog(busy, await register(busy, `/backlog/${i}`), `backlog_${i}`, 2000, '1 minute');
    const drained = () => h.receiver.received.filter((r) => r.path.startsWith('/backlog')).length;
    await waitFor('the backlog to be under way', () => drained() >= 100);

    const other = await h.api.account();
    const lags = await pingLags(other, await register(other, '/other'), '/other');
    expect(Math.max(...lags)).toBeLessThan(3000);
    // Measured while the backlog was still being sent.
    const [{ left }] = await h.api.db.query(
      `SELECT count(*)::int AS left FROM webhook_deliveries WHERE account_id = $1 AND status = 'pending'`,
      [busy.id],
    );
    expect(left).toBeGreaterThan(1000);
  });
});

describe('webhook delivery: beside an account at its share, another drains its backlog at its own pace', () => {
  // The default poll interval: the sender waits for it when every delivery it may take is in flight.
  const { h, register, backlog, greedyAccount } = harness('webhooks_fair_pace', 500);

  /** How long (ms) 100 deliveries due now take to reach the endpoint. */
  async function drain(a: TestAccount, endpointId: string, path: string, tag: string): Promise<number> {
    const before = h.receiver.received.filter((r) => r.path === path).length;
    const start = Date.now();
    await backlog(a, endpointId, tag, 100);
    await waitFor(`100 deliveries (${tag})`, () => h.receiver.received.filter((r) => r.path === path).length >= before + 100, 60_000, 20);
    return Date.now() - start;
  }

  it('100 deliveries to a healthy endpoint take at most twice their time alone (plus a second)', async () => {
    const healthy = await h.api.account();
    const endpoint = await register(healthy, '/pace');
    const alone = await drain(healthy, endpoint, '/pace', 'alone');
    await greedyAccount();
    const beside = await drain(healthy, endpoint, '/pace', 'beside');
    expect(beside).toBeLessThan(2 * alone + 1000);
  });
});
