import { Logger } from '@nestjs/common';
import { Client } from 'minio';
import * as http from 'node:http';
import * as https from 'node:https';
import type { Readable } from 'node:stream';
import { StorageObjectNotFoundError } from './storage.errors';
import { StorageDriver, StoredObject } from './storage.driver';
import { assertValidKey, isValidKey, keyFromUrlUnder, ObjectKeyPrefix } from './storage.keys';

/** Same shape as KilnConfig.storage.minio. */
export interface MinioStorageOptions {
  endPoint: string;
  port: number;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
  bucket: string;
  /** Where anonymous clients reach the bucket, e.g. `https://cdn.example.com/kiln`. */
  publicUrl: string;
  /** Longest a call may go without a byte either way (connecting included); then it fails. Default 10 s. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * The client's transport with an idle timeout on every request: the minio client sets none,
 * so a store that stops answering would hold a render's store step or an upload forever. The
 * timeout is of silence, not of the whole call: a large object streaming steadily is never cut.
 */
function transportWithTimeout(useSSL: boolean, timeoutMs: number): Pick<typeof http, 'request'> {
  const base = useSSL ? https : http;
  return {
    // The client calls request(options, callback) only.
    request: ((options: http.RequestOptions, callback?: (res: http.IncomingMessage) => void) => {
      const req = base.request(options, callback);
      req.setTimeout(timeoutMs, () => {
        req.destroy(Object.assign(new Error(`no answer for ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      });
      return req;
    }) as typeof http.request,
  };
}

/** Each call at boot; the client itself has no timeout. */
const INIT_TIMEOUT_MS = 10_000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${ms} ms`), { code: 'Timeout' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function errorCode(error: unknown): string | undefined {
  return (error as { code?: string } | undefined)?.code;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer | string>) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks);
}

export class MinioStorageDriver extends StorageDriver {
  private readonly logger = new Logger(MinioStorageDriver.name);
  private readonly client: Client;
  private readonly bucket: string;
  private readonly urlBase: string;
  /** The endpoint, for error messages. */
  private readonly where: string;

  constructor(options: MinioStorageOptions) {
    super();
    // Path style because MinIO and most self-hosted S3 servers are not set up for
    // bucket-per-subdomain DNS.
    this.client = new Client({
      endPoint: options.endPoint,
      port: options.port,
      useSSL: options.useSSL,
      accessKey: options.accessKey,
      secretKey: options.secretKey,
      pathStyle: true,
      transport: transportWithTimeout(options.useSSL, options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
    });
    this.bucket = options.bucket;
    this.where = `${options.useSSL ? 'https' : 'http'}://${options.endPoint}:${options.port}`;
    this.urlBase = options.publicUrl.replace(/\/+$/, '');
  }

  async init(): Promise<void> {
    try {
      if (!(await withTimeout(this.client.bucketExists(this.bucket), INIT_TIMEOUT_MS))) {
        try {
          await withTimeout(this.client.makeBucket(this.bucket), INIT_TIMEOUT_MS);
        } catch (error) {
          // The api and the generator both init at boot; whichever loses the race lands here.
          const code = errorCode(error);
          if (code !== 'BucketAlreadyOwnedByYou' && code !== 'BucketAlreadyExists') throw error;
        }
      }
      await this.allowAnonymousRead();
    } catch (error) {
      throw this.describe(error, 'cannot be set up');
    }
  }

  async check(timeoutMs: number): Promise<void> {
    let exists: boolean;
    try {
      exists = await withTimeout(this.client.bucketExists(this.bucket), timeoutMs);
    } catch (error) {
      throw this.describe(error, 'cannot be reached');
    }
    if (!exists) throw new Error(`Bucket "${this.bucket}" at ${this.where} does not exist`);
  }

  /** S3 errors say what went wrong, never where: this names the endpoint and the bucket too. */
  private describe(error: unknown, what: string): Error {
    const code = errorCode(error);
    const message = (error as Error | undefined)?.message ?? String(error);
    // The S3 code stays on the error, for callers that tell failures apart by it.
    return Object.assign(
      new Error(`Bucket "${this.bucket}" at ${this.where} ${what}: ${code ? `${code}: ` : ''}${message}`, { cause: error }),
      { code },
    );
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    assertValidKey(key);
    await this.client.putObject(this.bucket, key, body, body.length, { 'Content-Type': contentType });
  }

  async get(key: string): Promise<Buffer> {
    return readAll(await this.openRead(key));
  }

  async openRead(key: string): Promise<Readable> {
    assertValidKey(key);
    try {
      return await this.client.getObject(this.bucket, key);
    } catch (error) {
      if (errorCode(error) === 'NoSuchKey' || errorCode(error) === 'NotFound') {
        throw new StorageObjectNotFoundError(key);
      }
      throw error;
    }
  }

  async exists(key: string): Promise<boolean> {
    assertValidKey(key);
    try {
      await this.client.statObject(this.bucket, key);
      return true;
    } catch (error) {
      if (errorCode(error) === 'NotFound' || errorCode(error) === 'NoSuchKey') return false;
      throw error;
    }
  }

  async remove(key: string): Promise<void> {
    assertValidKey(key);
    await this.client.removeObject(this.bucket, key);
  }

  async *list(prefix: ObjectKeyPrefix): AsyncIterable<StoredObject> {
    // Page by page (the client follows the continuation tokens); only keys this driver could
    // have written are reported, so nothing else in a shared bucket is ever swept.
    for await (const item of this.client.listObjectsV2(this.bucket, `${prefix}/`, true)) {
      const { name, lastModified } = item as { name?: string; lastModified?: Date };
      if (name && lastModified && isValidKey(name)) yield { key: name, lastModified: new Date(lastModified) };
    }
  }

  publicUrl(key: string): string {
    assertValidKey(key);
    return `${this.urlBase}/${key}`;
  }

  keyFromPublicUrl(url: string): string | null {
    return keyFromUrlUnder(this.urlBase, url);
  }

  /**
   * Upload and result URLs are public by design (docs/api.md#result-urls-and-retention): the 128 random bits
   * in each key are the protection, so the bucket allows anonymous GetObject but not listing.
   */
  private async allowAnonymousRead(): Promise<void> {
    const policy = {
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Principal: { AWS: ['*'] },
          Action: ['s3:GetObject'],
          Resource: [`arn:aws:s3:::${this.bucket}/*`],
        },
      ],
    };
    try {
      await withTimeout(this.client.setBucketPolicy(this.bucket, JSON.stringify(policy)), INIT_TIMEOUT_MS);
    } catch (error) {
      // Some S3-compatible servers (s3rver, used in tests) have no bucket policies at all and
      // serve objects anonymously anyway; anything else is a real failure.
      if (errorCode(error) !== 'NotImplemented') throw error;
      this.logger.warn(
        `Bucket "${this.bucket}": this server does not implement bucket policies; ` + 'anonymous reads depend on its own defaults',
      );
    }
  }
}
