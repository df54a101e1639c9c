import { randomBytes } from 'node:crypto';
import { constants as fsConstants, Dir, mkdir, promises as fs, rename, writeFile } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import * as path from 'node:path';
import { StorageObjectNotFoundError } from './storage.errors';
import { StorageDriver, StoredObject } from './storage.driver';
import { assertValidKey, isValidKey, keyFromUrlUnder, ObjectKeyPrefix } from './storage.keys';

export interface LocalStorageOptions {
  /** KilnConfig.storage.dataDir; objects live under `<dataDir>/files`. */
  dataDir: string;
  /** KilnConfig.publicBaseUrl; the api serves `<publicBaseUrl>/files/<key>`. */
  publicBaseUrl: string;
}

/**
 * The absolute path of a key's file under `<dataDir>/files`, or null for an invalid key.
 * The api's file route calls this with the raw request path, so it must never throw.
 */
export function resolveLocalPath(dataDir: string, key: string): string | null {
  if (!isValidKey(key)) return null;
  const root = filesRoot(dataDir);
  const resolved = path.resolve(root, key);
  // isValidKey already rules out escapes; this guards against a future change to it.
  return resolved.startsWith(root + path.sep) ? resolved : null;
}

function filesRoot(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'files');
}

/*
 * The write path uses the callback API (promisified): fs.promises wraps every open file in a
 * FileHandle, which roughly doubled the cost of a small write here (100 concurrent 300-byte
 * objects: ~25 ms against ~11 ms), and a generator stores an object per image.
 */
const mkdirAsync = promisify(mkdir);
const writeFileAsync = promisify(writeFile);
const renameAsync = promisify(rename);

function isNotFound(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

export class LocalStorageDriver extends StorageDriver {
  private readonly root: string;
  private readonly urlBase: string;

  constructor(private readonly options: LocalStorageOptions) {
    super();
    this.root = filesRoot(options.dataDir);
    this.urlBase = `${options.publicBaseUrl.replace(/\/+$/, '')}/files`;
  }

  async init(): Promise<void> {
    await fs.mkdir(this.root, { recursive: true });
  }

  async check(_timeoutMs: number): Promise<void> {
    try {
      await fs.access(this.root, fsConstants.W_OK);
    } catch (error) {
      throw new Error(`Storage directory ${this.root} is not writable (${(error as NodeJS.ErrnoException).code})`);
    }
  }

  /** Same as the exported resolveLocalPath, bound to this driver's data directory. */
  resolveLocalPath(key: string): string | null {
    return resolveLocalPath(this.options.dataDir, key);
  }

  // contentType is not persisted: the api serves local files with a type derived from the
  // extension, and newObjectKey keeps the (sanitised) name's extension.
  async put(key: string, body: Buffer, _contentType: string): Promise<void> {
    const target = this.pathFor(key);
    // A concurrent remove() may drop the (then empty) directory between mkdir and write;
    // one retry recreates it.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.write(target, body);
        return;
      } catch (error) {
        if (attempt >= 2 || (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
  }

  async get(key: string): Promise<Buffer> {
    try {
      return await fs.readFile(this.pathFor(key));
    } catch (error) {
      if (isNotFound(error) || (error as NodeJS.ErrnoException).code === 'EISDIR') {
        throw new StorageObjectNotFoundError(key);
      }
      throw error;
    }
  }

  async openRead(key: string): Promise<Readable> {
    let handle: FileHandle;
    try {
      // Opened before the stream exists, so a missing file is an error here rather than a
      // stream that fails on its first read.
      handle = await fs.open(this.pathFor(key), 'r');
    } catch (error) {
      if (isNotFound(error)) throw new StorageObjectNotFoundError(key);
      throw error;
    }
    if (!(await handle.stat()).isFile()) {
      await handle.close();
      throw new StorageObjectNotFoundError(key);
    }
    return handle.createReadStream();
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await fs.stat(this.pathFor(key))).isFile();
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  }

  async remove(key: string): Promise<void> {
    const file = this.pathFor(key);
    await fs.rm(file, { force: true });
    // Each object from newObjectKey sits alone in its random directory; dropping that directory
    // keeps retention cleanup from leaving thousands of empty ones. Top-level prefix directories
    // are left alone because a concurrent put may be about to write inside them.
    const parent = path.dirname(file);
    if (path.dirname(parent) !== this.root && parent !== this.root) {
      await fs.rmdir(parent).catch(() => undefined);
    }
  }

  async *list(prefix: ObjectKeyPrefix): AsyncIterable<StoredObject> {
    yield* this.walk(prefix);
  }

  publicUrl(key: string): string {
    assertValidKey(key);
    return `${this.urlBase}/${key}`;
  }

  keyFromPublicUrl(url: string): string | null {
    return keyFromUrlUnder(this.urlBase, url);
  }

  /**
   * Every key newObjectKey makes sits alone in a directory of its own (a random segment), so
   * a put that creates that directory writes a key nobody can have read or be writing: it
   * writes the file in place, exclusively (mkdir, open, write, close). A put into a directory
   * that exists (the same key again) replaces the object atomically instead, through a temp
   * file and a rename, so a reader never sees half of it.
   */
  private async write(target: string, body: Buffer): Promise<void> {
    const dir = path.dirname(target);
    try {
      await mkdirAsync(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return this.replaceAtomically(target, body);
      if (code !== 'ENOENT') throw error;
      // The prefix directory is missing (first object under it): make the whole path.
      await mkdirAsync(dir, { recursive: true });
    }
    try {
      await writeFileAsync(target, body, { flag: 'wx' });
    } catch (error) {
      // Another put of the same key won the race for the file: replace it like a repeat put.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return this.replaceAtomically(target, body);
      await fs.rm(target, { force: true });
      throw error;
    }
  }

  private async replaceAtomically(target: string, body: Buffer): Promise<void> {
    // Temp file in the same directory so rename stays on one filesystem and is atomic; the
    // leading dot makes it unreachable through any valid key while it is being written.
    const temp = path.join(path.dirname(target), `.${path.basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await writeFileAsync(temp, body);
      await renameAsync(temp, target);
    } catch (error) {
      await fs.rm(temp, { force: true });
      throw error;
    }
  }

  /** Depth first, one directory open at a time; a put's temp files (dot names) are not objects. */
  private async *walk(dirKey: string): AsyncIterable<StoredObject> {
    let dir: Dir;
    try {
      dir = await fs.opendir(path.join(this.root, dirKey));
    } catch (error) {
      if (isNotFound(error)) return;
      throw error;
    }
    for await (const entry of dir) {
      const key = `${dirKey}/${entry.name}`;
      if (entry.isDirectory()) {
        yield* this.walk(key);
      } else if (entry.isFile() && isValidKey(key)) {
        try {
          const { mtime } = await fs.stat(path.join(this.root, key));
          yield { key, lastModified: mtime };
        } catch (error) {
          if (!isNotFound(error)) throw error;
        }
      }
    }
  }

  private pathFor(key: string): string {
    assertValidKey(key);
    return path.join(this.root, key);
  }
}
