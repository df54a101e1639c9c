import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { BatchesResource } from './batches';
import { KilnHttp } from './http';
import type { Catalog, Me, UploadResult, WebhookEvent } from './types';
import { verifyWebhook, WebhookHeaders, WebhooksResource } from './webhooks';

export interface KilnOptions {
  /** Default: the KILN_URL environment variable, else http://localhost:8080. */
  baseUrl?: string;
  /** A `kiln_live_...` key. Default: the KILN_API_KEY environment variable. */
  apiKey?: string;
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

/**
 * The Kiln client. Dependency-free: Node 20's fetch, crypto and streams.
 *
 * It reads KILN_URL and KILN_API_KEY itself when they are not passed: it is a client
 * package, published on its own, not part of Kiln's server configuration.
 */
export class Kiln {
  readonly batches: BatchesResource;
  readonly webhooks: WebhooksResource;
  readonly uploads: { create: (files: UploadInput[]) => Promise<UploadResult> };
  private readonly http: KilnHttp;

  constructor(options: KilnOptions = {}) {
    const apiKey = options.apiKey ?? process.env.KILN_API_KEY;
    if (!apiKey) throw new TypeError('Kiln: no API key; pass { apiKey } or set KILN_API_KEY');
    this.http = new KilnHttp({
      baseUrl: options.baseUrl ?? process.env.KILN_URL ?? 'http://localhost:8080',
      apiKey,
      maxRetries: options.maxRetries ?? 4,
      timeoutMs: options.timeoutMs ?? 60_000,
      userAgent: `kiln-sdk/${SDK_VERSION} node/${process.versions.node}`,
      fetch: options.fetch ?? globalThis.fetch,
    });
    this.batches = new BatchesResource(this.http);
    this.webhooks = new WebhooksResource(this.http);
    this.uploads = { create: (files) => this.upload(files) };
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
