import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { newSigningSecret, SecretBox, signatureHeader } from './webhook-secret';

const ID = 'evt_0123456789abcdef0123456789abcdef';
const BODY = JSON.stringify({ id: ID, type: 'ping', createdAt: 1_700_000_000_000, data: { endpointId: 'x' } });

/** Verification by hand, as docs/webhooks.md shows it. */
function verifyByHand(secret: string, headers: Record<string, string>, body: string): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`).digest();
  return headers['webhook-signature'].split(' ').some((sig) => {
    const [version, mac] = sig.split(',');
    const given = Buffer.from(mac ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

describe('webhook signatures', () => {
  const now = Math.floor(Date.now() / 1000);

  it('a new secret is whsec_ and the base64 of 32 random bytes', () => {
    const a = newSigningSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(a.slice(6), 'base64')).toHaveLength(32);
    expect(newSigningSecret()).not.toBe(a);
  });

  it('the standardwebhooks library and a hand-written check accept the signature; another secret or body is refused', () => {
    const secret = newSigningSecret();
    const headers = { 'webhook-id': ID, 'webhook-timestamp': String(now), 'webhook-signature': signatureHeader([secret], ID, now, BODY) };
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(secret).verify(BODY, headers)).toEqual(JSON.parse(BODY));
    expect(verifyByHand(secret, headers, BODY)).toBe(true);
    const other = newSigningSecret();
    expect(() => new Webhook(other).verify(BODY, headers)).toThrow();
    expect(verifyByHand(other, headers, BODY)).toBe(false);
    expect(() => new Webhook(secret).verify(BODY.replace('ping', 'pong'), headers)).toThrow();
  });

  it('during a rotation the header carries both signatures, and each secret verifies on its own', () => {
    const [current, previous] = [newSigningSecret(), newSigningSecret()];
    const header = signatureHeader([current, previous], ID, now, BODY);
    expect(header.split(' ')).toHaveLength(2);
    const headers = { 'webhook-id': ID, 'webhook-timestamp': String(now), 'webhook-signature': header };
    for (const secret of [current, previous]) {
      expect(new Webhook(secret).verify(BODY, headers)).toEqual(JSON.parse(BODY));
      expect(verifyByHand(secret, headers, BODY)).toBe(true);
    }
  });
});

describe('SecretBox (secrets at rest)', () => {
  const endpointId = '6f1c3a52-9a55-4c3e-9d1b-3f1f2a7b8c9d';

  it('seals with AES-256-GCM so that only the same key and endpoint open it', () => {
    const key = randomBytes(32);
    const box = new SecretBox(key);
    const secret = newSigningSecret();
    const sealed = box.seal(secret, endpointId);
    expect(sealed).not.toContain(secret.slice(6));
    expect(box.seal(secret, endpointId)).not.toBe(sealed); // a fresh IV each time
    expect(box.open(sealed, endpointId)).toBe(secret);
    expect(() => box.open(sealed, '00000000-0000-4000-8000-000000000000')).toThrow();
    expect(() => new SecretBox(randomBytes(32)).open(sealed, endpointId)).toThrow(/neither WEBHOOK_SECRET_KEY/);
    const parts = sealed.split('.');
    parts[4] = Buffer.from('tampered').toString('base64url');
    expect(() => box.open(parts.join('.'), endpointId)).toThrow();
  });

  it('rotation of the key: secrets sealed under a previous key still open and are not current', () => {
    const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
    const sealed = new SecretBox(oldKey).seal('whsec_x', endpointId);
    const rotated = new SecretBox(newKey, [oldKey]);
    expect(rotated.open(sealed, endpointId)).toBe('whsec_x');
    expect(rotated.isCurrent(sealed)).toBe(false);
    expect(rotated.isCurrent(rotated.seal('whsec_x', endpointId))).toBe(true);
  });

  it('without a key nothing can be sealed', () => {
    const box = new SecretBox(null);
    expect(box.ready).toBe(false);
    expect(() => box.seal('whsec_x', endpointId)).toThrow(/WEBHOOK_SECRET_KEY/);
  });
});
