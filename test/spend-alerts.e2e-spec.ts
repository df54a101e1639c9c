import { TestingModule } from '@nestjs/testing';
import { Webhook } from 'standardwebhooks';
import { buildConfig, KilnConfig } from '@app/config';
import { bearer, FileEnvironment, fileEnvironment, TestAccount, TestApp, waitFor } from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { WebhookReceiver } from './helpers/webhook-receiver';

jest.setTimeout(90_000);

/** credits.low and key.budget.threshold (docs/webhooks.md): written with the charge that crosses, once per crossing. */
describe('spend alerts as webhook events', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    const base = buildConfig(process.env).webhooks;
    const webhooks: KilnConfig['webhooks'] = {
      ...base,
      allowPrivate: true,
      retryDelaysMs: [300, 300, 300],
      timeoutMs: 1500,
      pollIntervalMs: 50,
    };
    env = await fileEnvironment('spend_alerts', { webhooks });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    receiver = await new WebhookReceiver().listen();
    receiver.reply = () => ({ status: 204 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await receiver?.close();
    await env?.teardown();
  });

  const batch = (k: { key: string }, credits: number) =>
    api.http
      .post('/v1/batches')
      .set('Authorization', `Bearer ${k.key}`)
      .send({ model: 'eta-image', prompts: Array.from({ length: credits }, (_, i) => `p${i} ${Math.random()}`) });

  it('credits.low once per downward crossing (re-armed by a grant), key.budget.threshold at 80 % and 100 % once; verified with standardwebhooks', async () => {
    const email = `alerts-${Date.now()}@example.test`;
    const signup = await api.http.post('/v1/dashboard/signup').send({ email, password: 'correct-horse-battery' }).expect(201);
    const session = { Authorization: `Bearer ${signup.body.token}` };
    const account = await api.http.get('/v1/dashboard/account').set(session).expect(200);
    const id: string = account.body.account.id;
    expect(account.body.account.lowCreditsThreshold).toBeNull();
    await api.admin('patch', `/v1/admin/accounts/${id}`).send({ plan: 'scale' }).expect(200);
    await api.admin('post', `/v1/admin/accounts/${id}/credits`).send({ amount: 20, reason: 'test grant' }).expect(200);

    await api.http.patch('/v1/dashboard/account').set(session).send({ lowCreditsThreshold: 0 }).expect(400);
    const set = await api.http.patch('/v1/dashboard/account').set(session).send({ lowCreditsThreshold: 10 }).expect(200);
    expect(set.body.account).toMatchObject({ id, lowCreditsThreshold: 10, balance: 20 });

    const made = await api.http
      .post('/v1/dashboard/keys')
      .set(session)
      .send({ name: 'budgeted', budget: { credits: 10, period: 'day' } })
      .expect(201);
    const budgeted = { key: made.body.secret as string, keyId: made.body.key.id as string };
    const plain = {
      key: (await api.http.post('/v1/dashboard/keys').set(session).send({ name: 'plain' }).expect(201)).body.secret as string,
    };
    const me = await api.http.get('/v1/me').set('Authorization', `Bearer ${plain.key}`).expect(200);
    expect(me.body.credits).toEqual({ balance: 20, lowCreditsThreshold: 10 });
    const endpoint = await api.http
      .post('/v1/webhooks')
      .set('Authorization', bearer({ key: plain.key } as TestAccount))
      .send({ url: receiver.url('/alerts'), events: ['credits.low', 'key.budget.threshold'] })
      .expect(201);

    await batch(budgeted, 4).expect(201); // balance 16, spent 4
    await batch(budgeted, 4).expect(201); // balance 12, spent 8: 80 %
    await batch(budgeted, 2).expect(201); // balance 10, spent 10: 100 %; 10 is not below 10
    await batch(budgeted, 1).expect(403); // over budget: nothing charged, nothing sent
    await batch(plain, 1).expect(201); // balance 9: credits.low
    await batch(plain, 1).expect(201); // balance 8: still low, no second event
    await api.admin('post', `/v1/admin/accounts/${id}/credits`).send({ amount: 10, reason: 're-arm' }).expect(200); // 18
    await batch(plain, 9).expect(201); // balance 9: credits.low again

    const hooks = () => receiver.received.filter((r) => r.path === '/alerts');
    await waitFor('4 alerts', () => hooks().length >= 4, 30_000);
    await new Promise((r) => setTimeout(r, 500)); // nothing more arrives
    const bodies = hooks().map((h) => JSON.parse(h.body));
    const low = bodies.filter((b) => b.type === 'credits.low').map((b) => b.data);
    const thresholds = bodies.filter((b) => b.type === 'key.budget.threshold').map((b) => b.data);
    expect(bodies).toHaveLength(4);
    expect(low).toEqual([
      { balance: 9, threshold: 10, batchId: expect.any(String) },
      { balance: 9, threshold: 10, batchId: expect.any(String) },
    ]);
    expect(thresholds.map((d) => [d.percent, d.spent])).toEqual([
      [80, 8],
      [100, 10],
    ]);
    expect(thresholds[0]).toMatchObject({ keyId: budgeted.keyId, budget: { credits: 10, period: 'day' }, resetsAt: expect.any(Number) });
    for (const hook of hooks())
      expect(() => new Webhook(endpoint.body.secret).verify(hook.body, hook.headers as Record<string, string>)).not.toThrow();

    const [{ balance }] = await api.db.query(`SELECT balance FROM accounts WHERE id = $1`, [id]);
    expect(Number(balance)).toBe(await api.ledgerSum(id));
  });
});
