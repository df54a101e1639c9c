import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { BatchesResource } from './batches';
import { HttpOptions, KilnHttp } from './http';
import { KeysResource } from './keys';
import type { Catalog, Me, Session, UploadResult, WebhookEvent } from './types';
import { verifyWebhook, WebhookHeaders, WebhooksResource } from './webhooks';

export interface KilnOptions {
  /** Default: the KILN_URL environment variable, else http://localhost:8080. */
  baseUrl?: string;
  /** A `kiln_live_...` key, for the public API. Default: the KILN_API_KEY environment variable. */
  apiKey?: string;
  /**
   * A dashboard session token (`kiln_sess_...`, from `Kiln.login` or `POST /v1/dashboard/login`),
   * for `kiln.keys`. Default: the KILN_SESSION environment variable.
   */
  sessionToken?: string;
  /** Retries of a request refused with 429/503, or (when repeating it is harmless) a 5xx or a lost connection. Default 4. */
  maxRetries?: number;
  /** How long one request may take before it is abandoned (and retried). Default 60 000 ms. */
  timeoutMs?: number;
  /** A fetch of your own (tests, proxies); default Node's. */
  fetch?: typeof fetch;
}

/** A file to upload: a path on disk, or bytes with a name. */
export type UploadInput = string | { name: string; data: Uint8Array | Blob; type?: string };

export const SDK_VERSION = '0.1.0';

const NO_API_KEY = 'Kiln: no API key; pass { apiKey } or set KILN_API_KEY';
const NO_SESSION = 'Kiln: kiln.keys needs a session; pass { sessionToken }, set KILN_SESSION or use Kiln.login(email, password)';

/** The transport of a client, less its credential. */
function transport(options: KilnOptions): Omit<HttpOptions, 'token' | 'missingToken'> {
  return {
    baseUrl: options.baseUrl ?? process.env.KILN_URL ?? 'http://localhost:8080',
    maxRetries: options.maxRetries ?? 4,
    timeoutMs: options.timeoutMs ?? 60_000,
    userAgent: `kiln-sdk/${SDK_VERSION} node/${process.versions.node}`,
    fetch: options.fetch ?? globalThis.fetch,
  };
}

/**
 * The Kiln client. Dependency-free: Node 20's fetch, crypto and streams.
 *
 * It reads KILN_URL, KILN_API_KEY and KILN_SESSION itself when they are not passed: it is a
 * client package, published on its own, not part of Kiln's server configuration. An API key
 * drives the public API; a session token (the account holder's, as the web app signs in)
 * drives `keys`. One client may hold both; a call whose credential is missing throws a
 * TypeError without sending anything.
 */
export class Kiln {
  readonly batches: BatchesResource;
  readonly webhooks: WebhooksResource;
  readonly uploads: { create: (files: UploadInput[]) => Promise<UploadResult> };
  /** The account's API keys: list, create, update (budget, models), revoke. Needs a session. */
  readonly keys: KeysResource;
  private readonly http: KilnHttp;
  private readonly sessionHttp: KilnHttp;
  private expiresAt: number | undefined;

  constructor(options: KilnOptions = {}) {
    const apiKey = options.apiKey ?? process.env.KILN_API_KEY;
    const sessionToken = options.sessionToken ?? process.env.KILN_SESSION;
    if (!apiKey && !sessionToken) throw new TypeError(`${NO_API_KEY} (or, for kiln.keys, { sessionToken } or KILN_SESSION)`);
    const base = transport(options);
    this.http = new KilnHttp({ ...base, token: apiKey, missingToken: NO_API_KEY });
    this.sessionHttp = new KilnHttp({ ...base, token: sessionToken, missingToken: NO_SESSION });
    this.batches = new BatchesResource(this.http);
    this.webhooks = new WebhooksResource(this.http);
    this.keys = new KeysResource(this.sessionHttp);
    this.uploads = { create: (files) => this.upload(files) };
  }

  /**
   * Signs in as the account holder (`POST /v1/dashboard/login`) and answers a client holding
   * that session (and `options.apiKey` or KILN_API_KEY, if any). Keep `kiln.sessionToken` to
   * reuse the session (it expires; `logout` ends it sooner). Wrong email or password:
   * KilnApiError `invalid_credentials` (401).
   */
  static async login(email: string, password: string, options: Omit<KilnOptions, 'sessionToken'> = {}): Promise<Kiln> {
    const http = new KilnHttp({ ...transport(options), token: undefined, missingToken: NO_SESSION });
    // Not repeated once sent (only 429/503, which did nothing): a repeat would open a second session.
    const { body } = await http.json<Session>('POST', '/v1/dashboard/login', { body: { email, password }, anonymous: true });
    const kiln = new Kiln({ ...options, sessionToken: body.token });
    kiln.expiresAt = body.expiresAt;
    return kiln;
  }

  /** The session token this client sends to `keys`, if any (to keep for later clients). */
  get sessionToken(): string | undefined {
    return this.sessionHttp.options.token;
  }

  /** When the session of `Kiln.login` expires (Unix ms); undefined for a token passed in. */
  get sessionExpiresAt(): number | undefined {
    return this.expiresAt;
  }

  /** Ends the session (`POST /v1/dashboard/logout`): its token is refused from then on. */
  async logout(): Promise<void> {
    await this.sessionHttp.json('POST', '/v1/dashboard/logout');
  }

  get baseUrl(): string {
    return this.http.options.baseUrl;
  }

  /** The models with their prices and legal sizes. */
  async models(): Promise<Catalog> {
    return (await this.http.json<Catalog>('GET', '/v1/models', { repeatable: true })).body;
  }

  /** The account, its balance, its plan's limits and this key's usage today. */
  async me(): Promise<Me> {
    return (await this.http.json<Me>('GET', '/v1/me', { repeatable: true })).body;
  }

  /** Uploads reference images (free); pass the answered URLs as `refImages`. */
  private async upload(files: UploadInput[]): Promise<UploadResult> {
    const form = new FormData();
    for (const file of files) {
      if (typeof file === 'string') form.append('file', new Blob([await readFile(file)]), path.basename(file));
      else
        form.append('file', file.data instanceof Blob ? file.data : new Blob([Uint8Array.from(file.data)], { type: file.type }), file.name);
    }
    // Uploads are free and unreferenced ones expire: sending one twice is harmless.
    return (await this.http.json<UploadResult>('POST', '/v1/uploads', { form, repeatable: true })).body;
  }

  /** See verifyWebhook: checks a delivery's Standard Webhooks signature and returns its event. */
  static verifyWebhook<T = unknown>(
    body: string | Buffer | Uint8Array,
    headers: WebhookHeaders,
    secret: string,
    options?: { toleranceSeconds?: number; now?: Date },
  ): WebhookEvent<T> {
    return verifyWebhook<T>(body, headers, secret, options);
  }
}
