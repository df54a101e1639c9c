import type { RenderContentType } from './render.types';

/**
 * Rejects with the signal's own reason, as fetch does, so a caller that aborted (shutdown,
 * cancelled batch) recognises its abort instead of mistaking it for an upstream failure.
 */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Waits ms, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Content type from the first bytes: upstream headers and names are not to be trusted. */
export function sniffImageType(data: Buffer): RenderContentType | null {
  if (data.length >= 8 && data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
    return 'image/png';
  }
  if (data.length >= 3 && data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'image/jpeg';
  if (data.length >= 12 && data.toString('latin1', 0, 4) === 'RIFF' && data.toString('latin1', 8, 12) === 'WEBP') {
    return 'image/webp';
  }
  return null;
}

/** Progress callbacks belong to the caller; one that throws must not fail a finished render. */
export function reportProgress(onProgress: ((pct: number) => void) | undefined, pct: number): void {
  if (!onProgress) return;
  try {
    onProgress(pct);
  } catch {
    // deliberately ignored: see above
  }
}
