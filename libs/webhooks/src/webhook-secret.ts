import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new signing secret: `whsec_` and the base64 of 32 random bytes (Standard Webhooks). */
export function newSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/**
 * `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, keyed with the bytes the secret
 * encodes after `whsec_`: the scheme the `standardwebhooks` and `svix` libraries verify.
 */
export function signPayload(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The webhook-signature header: one signature per secret, space-separated (during a rotation, two). */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((secret) => signPayload(secret, id, timestamp, body)).join(' ');
}

const SEALED = /^v1\.([0-9a-f]{8})\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/;

/**
 * Signing secrets at rest: AES-256-GCM under WEBHOOK_SECRET_KEY, with the endpoint's id as
 * associated data (a sealed secret copied onto another row does not open). The sealed form,
 * `v1.<key id>.<iv>.<tag>.<ciphertext>`, names its key by the first 8 hex digits of the key's
 * SHA-256, so secrets sealed under a previous key (WEBHOOK_SECRET_KEY_PREVIOUS) still open
 * and can be sealed again under the current one.
 */
export class SecretBox {
  private readonly keys = new Map<string, Buffer>();
  private readonly currentId: string | null;

  constructor(
    private readonly current: Buffer | null,
    previous: readonly Buffer[] = [],
  ) {
    for (const key of previous) this.keys.set(keyIdOf(key), key);
    this.currentId = current ? keyIdOf(current) : null;
    if (current) this.keys.set(this.currentId!, current);
  }

  /** False without WEBHOOK_SECRET_KEY: nothing can be sealed (endpoints cannot be created). */
  get ready(): boolean {
    return this.current !== null;
  }

  seal(secret: string, endpointId: string): string {
    if (!this.current) throw new Error('WEBHOOK_SECRET_KEY is not set');
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current, iv);
    cipher.setAAD(Buffer.from(endpointId));
    const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return [
      'v1',
      this.currentId,
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      ciphertext.toString('base64url'),
    ].join('.');
  }

  /** The secret, or an Error naming why it cannot be opened (unknown key, tampered). */
  open(sealed: string, endpointId: string): string {
    const m = SEALED.exec(sealed);
    if (!m) throw new Error('not a sealed webhook secret');
    const key = this.keys.get(m[1]);
    if (!key) throw new Error(`sealed under key ${m[1]}, which is neither WEBHOOK_SECRET_KEY nor in WEBHOOK_SECRET_KEY_PREVIOUS`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(m[2], 'base64url'));
    decipher.setAAD(Buffer.from(endpointId));
    decipher.setAuthTag(Buffer.from(m[3], 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(m[4], 'base64url')), decipher.final()]).toString('utf8');
  }

  /** True when the sealed secret is under the current key (nothing to re-seal). */
  isCurrent(sealed: string): boolean {
    return this.currentId !== null && sealed.startsWith(`v1.${this.currentId}.`);
  }
}

function keyIdOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}
