import { sanitizeFileName } from '@app/storage';

const MAX_DISPLAY_NAME_LENGTH = 255;
// C0/C1 controls and the bidi overrides/isolates that can make "gpj.exe" display as "exe.jpg".
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * The name returned to the client and stored on the row: the client's own file name (the
 * interface promises the original), minus characters that corrupt logs or displays.
 */
export function uploadDisplayName(originalName: string | undefined | null): string {
  const cleaned = (originalName ?? '').replace(UNPRINTABLE, '').trim();
  // Cut by code point so a surrogate pair is never split in half.
  const capped = Array.from(cleaned).slice(0, MAX_DISPLAY_NAME_LENGTH).join('').trim();
  return capped.length > 0 ? capped : 'file';
}

/**
 * The last key segment of a stored upload: the sanitised base name with the extension of the
 * detected type, so "photo.png" holding JPEG bytes is stored (and served) as "photo.jpg".
 */
export function uploadObjectName(originalName: string, extension: string): string {
  const base = originalName.split(/[/\\]/).pop() ?? '';
  const withoutExtension = base.replace(/\.[^.]*$/, '');
  const safeBase = sanitizeFileName(withoutExtension).replace(/\.+$/, '') || 'file';
  return sanitizeFileName(`${safeBase}.${extension}`);
}
