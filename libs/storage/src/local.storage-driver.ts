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
 * Where a key's object lives under `<dataDir>/files`. A key of newObjectKey's shape,
 * `<prefix>/<token>/<name>`, is the file `<prefix>/<first 2 of token>/<token>~<name>`; keys of
 * any other shape are their own path. The older layout, a directory per object (the key's own
 * path), cost a mkdir per image: 3-5 times the file's own write once the store held tens of
 * thousands (ext4 allocating a directory's inode and block), and the sweeps opened a directory
 * per object. Shards of 2 characters keep each directory small (a 32-hex token gives 256),
 * and `~` is outside the key alphabet, so a file name maps back to exactly one key.
 */
const SHARD_LENGTH = 2;
const NAME_SEPARATOR = '~';

function layoutPath(key: string): string {
  const segments = key.split('/');
  if (segments.length !== 3) return key;
  const [prefix, token, name] = segments;
  return `${prefix}/${token.slice(0, SHARD_LENGTH)}/${token}${NAME_SEPARATOR}${name}`;
}

/**
 * The key of a file found under `<dataDir>/files` (path relative to it, `/`-separated), in
 * either layout; null for what is not an object (a put's temp file, a stray name).
 */
function keyOfLayoutPath(relative: string): string | null {
  const segments = relative.split('/');
  const name = segments[segments.length - 1];
  if (name.startsWith('.')) return null;
  const at = name.indexOf(NAME_SEPARATOR);
  if (segments.length === 3 && at > 0) {
    const token = name.slice(0, at);
    const key = `${segments[0]}/${token}/${name.slice(at + 1)}`;
    return token.slice(0, SHARD_LENGTH) === segments[1] && isValidKey(key) ? key : null;
  }
  return isValidKey(relative) ? relative : null;
}

/**
 * The absolute path a put of `key` writes under `<dataDir>/files`, or null for an invalid key.
 * An object stored before the sharded layout is still read, listed and removed at the key's
 * own path (LocalStorageDriver.findLocalFile serves either).
 */
export function resolveLocalPath(dataDir: string, key: string): string | null {
  return isValidKey(key) ? underRoot(filesRoot(dataDir), layoutPath(key)) : null;
}

/**
 * The key's own path, where the directory-per-object layout kept it; null when that is where a
 * put writes. That layout is read (here, and through candidatePaths, remove's directory removal
 * and keyOfLayoutPath's own path of a three-segment key) only for objects stored before
 * 2026-11-27, which nothing writes any more and the retention sweep removes: uploads and
 * results RETENTION_DAYS after the upgrade, a preview RETENTION_DAYS after its batch ended (an
 * economy batch up to 7 days after the upgrade). Kept until 2027-01-31 (the default 30 days
 * plus that week, with room for a late upgrade); the first build after that date may delete
 * this reading, on the condition that no generator still logs "objects of the local driver's
 * older layout" at start (olderLayoutObjects; docs/operations.md "Local storage on disk").
 */
function legacyLocalPath(root: string, key: string): string | null {
  return layoutPath(key) === key ? null : underRoot(root, key);
}

function underRoot(root: string, relative: string): string | null {
  const resolved = path.resolve(root, relative);
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
      throw new Error(`Storage directory ${this.root} is not writable (${(error as NodeJS.ErrnoException).code})`, { cause: error });
    }
  }

  /**
   * How many objects of the older layout are left: each had a directory of its own, named by
   * its 32-character token, beside the 2-character shards, so one readdir of each prefix
   * counts them without opening any.
   */
  async olderLayoutObjects(): Promise<number> {
    let count = 0;
    for (const prefix of await this.directoriesIn(this.root)) {
      count += (await this.directoriesIn(path.join(this.root, prefix))).filter((name) => name.length > SHARD_LENGTH).length;
    }
    return count;
  }

  /** Same as the exported resolveLocalPath, bound to this driver's data directory. */
  resolveLocalPath(key: string): string | null {
    return resolveLocalPath(this.options.dataDir, key);
  }

  /**
   * The file holding the key's object, in either layout, or null (no such object, or an
   * invalid key). The api's file route calls this with the raw request path, so it never throws.
   */
  async findLocalFile(key: string): Promise<string | null> {
    return isValidKey(key) ? this.fileOf(key).catch(() => null) : null;
  }

  // contentType is not persisted: the api serves local files with a type derived from the
  // extension, and newObjectKey keeps the (sanitised) name's extension.
  async put(key: string, body: Buffer, _contentType: string): Promise<void> {
    await this.write(this.pathFor(key), body);
  }

  async get(key: string): Promise<Buffer> {
    for (const file of this.candidatePaths(key)) {
      try {
        return await fs.readFile(file);
      } catch (error) {
        if (!isNotFound(error) && (error as NodeJS.ErrnoException).code !== 'EISDIR') throw error;
      }
    }
    throw new StorageObjectNotFoundError(key);
  }

  async openRead(key: string): Promise<Readable> {
    for (const file of this.candidatePaths(key)) {
      let handle: FileHandle;
      try {
        // Opened before the stream exists, so a missing file is an error here rather than a
        // stream that fails on its first read.
        handle = await fs.open(file, 'r');
      } catch (error) {
        if (isNotFound(error)) continue;
        throw error;
      }
      if ((await handle.stat()).isFile()) return handle.createReadStream();
      await handle.close();
    }
    throw new StorageObjectNotFoundError(key);
  }

  async exists(key: string): Promise<boolean> {
    return (await this.fileOf(key)) !== null;
  }

  async remove(key: string): Promise<void> {
    await fs.rm(this.pathFor(key), { force: true });
    // Shards stay (at most 256 a prefix, and a concurrent put may be writing into one). An
    // object of the older layout sat alone in its random directory: that directory goes too,
    // so retention does not leave thousands of empty ones.
    const legacy = legacyLocalPath(this.root, key);
    if (!legacy) return;
    await fs.rm(legacy, { force: true });
    await fs.rmdir(path.dirname(legacy)).catch(() => undefined);
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
   * Every key newObjectKey makes is new (a random segment), so a put that creates its file
   * writes a key nobody can have read: it writes the file in place, exclusively (open, write,
   * close). A put that finds the file (the same key again, or a concurrent put of it) replaces
   * the object atomically instead, through a temp file and a rename, so a reader never sees
   * half of it. The shard's directory is made on the first put into it (or after a remove of
   * an older-layout object dropped it as empty).
   */
  private async write(target: string, body: Buffer): Promise<void> {
    try {
      await this.writeExclusively(target, body);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      await mkdirAsync(path.dirname(target), { recursive: true });
      await this.writeExclusively(target, body);
    }
  }

  /** A new file, or the atomic replacement of the one there; ENOENT when its directory is missing. */
  private async writeExclusively(target: string, body: Buffer): Promise<void> {
    try {
      await writeFileAsync(target, body, { flag: 'wx' });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return this.replaceAtomically(target, body);
      // A file this put created (then failed to fill, e.g. ENOSPC) is nobody else's.
      if (code !== 'ENOENT') await fs.rm(target, { force: true });
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

  /**
   * Depth first, one directory open at a time, through both layouts; a put's temp files (dot
   * names) are not objects.
   */
  private async *walk(dirPath: string): AsyncIterable<StoredObject> {
    let dir: Dir;
    try {
      dir = await fs.opendir(path.join(this.root, dirPath));
    } catch (error) {
      if (isNotFound(error)) return;
      throw error;
    }
    for await (const entry of dir) {
      const relative = `${dirPath}/${entry.name}`;
      if (entry.isDirectory()) {
        yield* this.walk(relative);
        continue;
      }
      const key = entry.isFile() ? keyOfLayoutPath(relative) : null;
      if (!key) continue;
      try {
        const { mtime } = await fs.stat(path.join(this.root, relative));
        yield { key, lastModified: mtime };
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
  }

  private async directoriesIn(dirPath: string): Promise<string[]> {
    try {
      return (await fs.readdir(dirPath, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    } catch (error) {
      if (isNotFound(error)) return [];
      throw error;
    }
  }

  /** Where a put of the key writes. */
  private pathFor(key: string): string {
    assertValidKey(key);
    return path.join(this.root, layoutPath(key));
  }

  /** The file holding the key's object, in either layout, or null. */
  private async fileOf(key: string): Promise<string | null> {
    for (const file of this.candidatePaths(key)) {
      try {
        if ((await fs.stat(file)).isFile()) return file;
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
    return null;
  }

  /** Where the key's object may be: where a put writes, then the older layout's place. */
  private candidatePaths(key: string): string[] {
    const legacy = legacyLocalPath(this.root, key);
    return legacy ? [this.pathFor(key), legacy] : [this.pathFor(key)];
  }
}

/**
 * Objects of the local driver's older layout still stored (0 with any other driver), for the
 * generator to say at start until the retention sweep has removed them all.
 */
export async function olderLayoutObjects(driver: StorageDriver): Promise<number> {
  return driver instanceof LocalStorageDriver ? driver.olderLayoutObjects() : 0;
}
