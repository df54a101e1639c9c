import type { Readable } from 'node:stream';
import type { ObjectKeyPrefix } from './storage.keys';

/** An object as a listing reports it. */
export interface StoredObject {
  key: string;
  /** When it was last written (a put replacing it counts). */
  lastModified: Date;
}

/**
 * Where uploads, results and previews live. Everything outside libs/storage uses this class as
 * the injection token and never learns whether the bytes are on disk or in S3/MinIO.
 * Keys are made by newObjectKey; every method refuses other shapes with InvalidStorageKeyError.
 */
export abstract class StorageDriver {
  /** Creates the bucket or directory when missing; safe to call from several processes at once. */
  abstract init(): Promise<void>;

  /**
   * For readiness probes: resolves when the store answers within timeoutMs and can be written
   * to, else rejects with a message naming where it looked (endpoint and bucket, or directory).
   */
  abstract check(timeoutMs: number): Promise<void>;

  /** Stores the object, replacing any previous one; readers never see a partial body. */
  abstract put(key: string, body: Buffer, contentType: string): Promise<void>;

  /** Throws StorageObjectNotFoundError when nothing is stored under the key. */
  abstract get(key: string): Promise<Buffer>;

  /**
   * The object as a stream, for bodies too large to hold (a batch's archive reads thousands).
   * Throws StorageObjectNotFoundError when nothing is stored under the key; the caller must
   * consume or destroy the stream.
   */
  abstract openRead(key: string): Promise<Readable>;

  abstract exists(key: string): Promise<boolean>;

  /** Removing a missing object is not an error, so retries and cleanups stay idempotent. */
  abstract remove(key: string): Promise<void>;

  /**
   * Every object under a key prefix, in no particular order, for maintenance (the orphan
   * sweep). Objects written or removed while the listing runs may or may not appear.
   */
  abstract list(prefix: ObjectKeyPrefix): AsyncIterable<StoredObject>;

  /** The anonymous URL clients download the object from. */
  abstract publicUrl(key: string): string;

  /** Inverse of publicUrl: the key, or null when the URL is not one of ours. */
  abstract keyFromPublicUrl(url: string): string | null;
}
