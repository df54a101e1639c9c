import { bearer, createBatch, TestAccount, waitFor } from '@app/testing';
import { useGeneratorProcesses } from './helpers/apps';
import { WebhookReceiver } from './helpers/webhook-receiver';

jest.setTimeout(120_000);

/**
 * An attempt's lease is 2 x WEBHOOK_TIMEOUT_MS + 5 s: 11 s here. A round of 50 attempts must
 * end within it or the other generator takes them again (at least once, as designed); on a
 * heavily loaded machine 7 s was not always enough, and the pair test then saw duplicates.
 */
const CHILD_ENV = {
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '3000',
  WEBHOOK_POLL_INTERVAL_MS: '20',
  WEBHOOK_RETRY_DELAYS_MS: '200,200,200',
};

describe('webhook delivery across generator processes (the built generator)', () => {
  const kiln = useGeneratorProcesses('webhooks_process', {
    childEnv: CHILD_ENV,
    overrides: (base) => ({ webhooks: { ...base.webhooks, allowPrivate: true } }),
  });
  let receiver: WebhookReceiver;
  const as = (a: TestAccount, method: 'get' | 'post', path: string) => kiln.api.http[method](`/v1${path}`).set('Authorization', bearer(a));

  beforeAll(async () => {
    receiver = await new WebhookReceiver().listen();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it('a generator SIGKILLed between the event commit and its delivery: another delivers it, with the same webhook-id', async () => {
    const a = await kiln.api.account();
    const ep = await as(a, 'post', '/webhooks')
      .send({ url: receiver.url('/killed'), events: ['task.succeeded'] })
      .expect(201);
    // The first attempt never gets an answer: the generator is killed while it waits.
    receiver.reply = (req) => (receiver.received.filter((r) => r.path === '/killed').indexOf(req) === 0 ? 'hang' : { status: 204 });
    const first = kiln.start();
    const batchId = await createBatch(kiln.api, a, { model: 'eta-image', prompts: ['killed mid-delivery'] });
    await waitFor('the first attempt', () => receiver.received.some((r) => r.path === '/killed'), 60_000);
    await kiln.kill(first, 'SIGKILL');

    const [row] = await kiln.api.db.query(`SELECT status, attempts FROM webhook_deliveries WHERE endpoint_id = $1`, [ep.body.endpoint.id]);
    expect(row).toEqual({ status: 'pending', attempts: 1 });
    kiln.start();
    const hooks = await waitFor(
      'the second attempt',
      () => {
        const got = receiver.received.filter((r) => r.path === '/killed');
        return got.length >= 2 ? got : null;
      },
      60_000,
    );
    expect(hooks[1].headers['webhook-id']).toBe(hooks[0].headers['webhook-id']);
    expect(hooks[1].body).toBe(hooks[0].body);
    expect(JSON.parse(hooks[1].body)).toMatchObject({ type: 'task.succeeded', data: { batchId, status: 'succeeded' } });
    const delivered = await waitFor('delivered', async () => {
      const [d] = (await as(a, 'get', `/webhooks/${ep.body.endpoint.id}/deliveries`).expect(200)).body.deliveries;
      return d.status === 'delivered' ? d : null;
    });
    expect(delivered).toMatchObject({ attempts: 2, lastStatusCode: 204 });
  });

  it('two generators: every delivery made, each attempt once', async () => {
    while (kiln.running().length < 2) kiln.start();
    const a = await kiln.api.account();
    const ep = await as(a, 'post', '/webhooks')
      .send({ url: receiver.url('/pair') })
      .expect(201);
    // Both poll every 20 ms, so their rounds overlap on the same due rows.
    receiver.reply = () => ({ status: 204 });
    const pings = await Promise.all(Array.from({ length: 60 }, () => as(a, 'post', `/webhooks/${ep.body.endpoint.id}/test`).expect(202)));
    const ids = pings.map((p) => p.body.delivery.id as string);
    await waitFor(
      '60 deliveries',
      async () => {
        const [{ n }] = await kiln.api.db.query(
          `SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'delivered'`,
          [ep.body.endpoint.id],
        );
        return n === 60;
      },
      60_000,
    );
    const received = receiver.received.filter((r) => r.path === '/pair').map((r) => r.headers['webhook-id'] as string);
    expect(received.sort()).toEqual([...ids].sort());
    const [{ max }] = await kiln.api.db.query(`SELECT max(attempts)::int AS max FROM webhook_deliveries WHERE endpoint_id = $1`, [
      ep.body.endpoint.id,
    ]);
    expect(max).toBe(1);
  });
});
