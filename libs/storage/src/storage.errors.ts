import { ErrorCode, KilnError } from '@app/errors';

/** A key that names no stored object; the api maps `not_found` to 404. */
export class StorageObjectNotFoundError extends KilnError {
  constructor(readonly key: string) {
    super(ErrorCode.NotFound, `Stored object not found: ${key}`, { key });
    this.name = 'StorageObjectNotFoundError';
  }
}

/**
 * A key outside the allowed alphabet or shape. Keys normally come from newObjectKey, so this
 * means either a bug or a caller passing user input straight through; both must stop here,
 * before the key reaches a file path or an S3 request.
 */
export class InvalidStorageKeyError extends KilnError {
  constructor(readonly key: string) {
    super(ErrorCode.InvalidRequest, 'Invalid storage key', { field: 'key', reason: 'invalid_storage_key' });
    this.name = 'InvalidStorageKeyError';
  }
}
