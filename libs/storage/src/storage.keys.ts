import { randomBytes } from 'node:crypto';
import { InvalidStorageKeyError } from './storage.errors';

export type ObjectKeyPrefix = 'uploads' | 'results' | 'previews';

const MAX_FILE_NAME_LENGTH = 100;
// Long enough for any key newObjectKey makes, short enough for every filesystem and S3.
const MAX_KEY_LENGTH = 512;
// Extensions longer than this are not worth keeping whole when a name must be shortened.
const MAX_KEPT_EXTENSION_LENGTH = 10;
const KEY_PATTERN = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/**
 * `<prefix>/<128 random bits as hex>/<sanitised name>`: the random segment is what makes public
 * URLs unguessable (docs/api.md#result-urls-and-retention); the name only helps people who download the file.
 */
export function newObjectKey(prefix: ObjectKeyPrefix, fileName: string): string {
  return `${prefix}/${newObjectToken()}/${sanitizeFileName(fileName)}`;
}

/** 128 random bits as hex: the part of a public URL nobody can guess. */
export function newObjectToken(): string {
  return randomBytes(16).toString('hex');
}

/**
 * A task's result: `results/<token>/kiln-<first 8 of the batch id>-<1-based index>.<ext>`,
 * the index zero-padded to at least 4 digits. The token is the task's own (kept with its
 * row), so every attempt at the task writes the same key: a redo overwrites the image a
 * crashed attempt left instead of leaving it behind.
 */
export function resultObjectKey(token: string, batchId: string, index: number, extension: string): string {
  return `results/${token}/kiln-${batchId.slice(0, 8)}-${String(index).padStart(4, '0')}.${extension}`;
}

/** Turns a client-supplied file name into one safe as a single key segment and URL path part. */
export function sanitizeFileName(name: string): string {
  const baseName = name.split(/[/\\]/).pop() ?? '';
  let safe = baseName
    // Accents are kept as their base letter so "café.png" stays readable instead of "caf-.png".
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    // eslint-disable-next-line no-control-regex -- control characters are exactly what this strips
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, '')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    // Runs of dots are collapsed and leading dots dropped so no name is "..", hidden, or
    // contains ".." (which isValidKey refuses anywhere in a key).
    .replace(/\.{2,}/g, '.')
    .replace(/^\.+/, '');
  if (safe.length > MAX_FILE_NAME_LENGTH) safe = shortenKeepingExtension(safe);
  return safe.length > 0 ? safe : 'file';
}

function shortenKeepingExtension(name: string): string {
  const dot = name.lastIndexOf('.');
  const extension = dot > 0 ? name.slice(dot) : '';
  if (extension.length === 0 || extension.length > MAX_KEPT_EXTENSION_LENGTH) {
    return name.slice(0, MAX_FILE_NAME_LENGTH);
  }
  return name.slice(0, MAX_FILE_NAME_LENGTH - extension.length) + extension;
}

/**
 * Keys become file paths (local driver) and URL paths (both drivers), so only a narrow shape is
 * accepted: slash-separated segments of [A-Za-z0-9._-], no empty segment, no segment starting
 * with "." (this also keeps the local driver's ".<name>.<random>.tmp" files unaddressable),
 * no ".." anywhere, never absolute.
 */
export function isValidKey(key: string): boolean {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) return false;
  if (!KEY_PATTERN.test(key) || key.includes('..')) return false;
  return key.split('/').every((segment) => !segment.startsWith('.'));
}

export function assertValidKey(key: string): void {
  if (!isValidKey(key)) throw new InvalidStorageKeyError(key);
}

/**
 * The key a public URL points to when it lies under `baseUrl`, else null. Both URLs are parsed
 * so that differences an HTTP client would ignore (host case, default port, dot segments) do
 * not make one of our own URLs look foreign.
 */
export function keyFromUrlUnder(baseUrl: string, url: string): string | null {
  let base: URL;
  let target: URL;
  try {
    base = new URL(baseUrl);
    target = new URL(url);
  } catch {
    return null;
  }
  if (target.origin !== base.origin) return null;
  const basePath = base.pathname.replace(/\/+$/, '') + '/';
  if (!target.pathname.startsWith(basePath)) return null;
  const key = target.pathname.slice(basePath.length);
  return isValidKey(key) ? key : null;
}
