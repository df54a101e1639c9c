import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { Kiln } from './client';
import { KilnWebhookVerificationError } from './errors';

const secret = `whsec_${randomBytes(32).toString('base64')}`;
const body = JSON.stringify({ id: 'evt_1', type: 'batch.completed', createdAt: 1, data: { id: 'b1' } });

/** Headers as a Standard Webhooks sender makes them (the reference library signs). */
function signed(payload: string, at = new Date(), key = secret) {
  const signature = new Webhook(key).sign('evt_1', at, payload);
  return { 'webhook-id': 'evt_1', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature };
}

describe('Kiln.verifyWebhook', () => {
  it('accepts what the Standard Webhooks library signs, and returns the event', () => {
    expect(Kiln.verifyWebhook(body, signed(body), secret)).toEqual(JSON.parse(body));
    expect(Kiln.verifyWebhook(Buffer.from(body), new Headers(signed(body)), secret).type).toBe('batch.completed');
  });

  it('accepts either signature during a secret rotation', () => {
    const other = `whsec_${randomBytes(32).toString('base64')}`;
    const headers = signed(body);
    headers['webhook-signature'] = `${signed(body, new Date(), other)['webhook-signature']} ${headers['webhook-signature']}`;
    expect(Kiln.verifyWebhook(body, headers, secret).id).toBe('evt_1');
  });

  it('refuses a changed body, another secret, a stale timestamp and missing headers', () => {
    const headers = signed(body);
    expect(() => Kiln.verifyWebhook(body.replace('b1', 'b2'), headers, secret)).toThrow(KilnWebhookVerificationError);
    expect(() => Kiln.verifyWebhook(body, headers, `whsec_${randomBytes(32).toString('base64')}`)).toThrow(/No webhook signature matches/);
    const old = signed(body, new Date(Date.now() - 10 * 60_000));
    expect(() => Kiln.verifyWebhook(body, old, secret)).toThrow(/too old/);
    expect(Kiln.verifyWebhook(body, old, secret, { now: new Date(Date.now() - 10 * 60_000) }).id).toBe('evt_1');
    expect(() => Kiln.verifyWebhook(body, { 'webhook-id': 'evt_1' }, secret)).toThrow(/Missing/);
  });
});
