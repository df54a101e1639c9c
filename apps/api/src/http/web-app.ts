import type { NextFunction, Request, Response } from 'express';
import { existsSync, promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { KilnConfig } from '@app/config';
import { ErrorCode } from '@app/errors';

/** Where the web app lives (docs/web.md); `GET /` sends browsers there. */
export const WEB_APP_PATH = '/app/';
/** Vite puts every built asset here under a content-hashed name, so it may be cached for good. */
const ASSETS_PREFIX = 'assets/';

/**
 * The headers of every page and asset of the web app: a CSP that lets the page load only its
 * own scripts, styles and requests, images also from where results are stored, and nobody
 * frame it; no MIME sniffing (securityHeaders sets it for every answer); no Referer leaving
 * the origin.
 */
export function webAppHeaders(config: KilnConfig): Record<string, string> {
  const imageOrigins = ["'self'", storageOrigin(config)];
  const csp = [
    "default-src 'self'",
    `img-src ${[...new Set(imageOrigins)].join(' ')}`,
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  return {
    'Content-Security-Policy': csp,
    'Referrer-Policy': 'same-origin',
  };
}

/** The origin result and preview URLs point at: PUBLIC_BASE_URL's (/files) or the bucket's. */
function storageOrigin(config: KilnConfig): string {
  const base = config.storage.driver === 'minio' ? config.storage.minio.publicUrl : config.publicBaseUrl;
  return new URL(base).origin;
}

/**
 * Serves the built web app (config.webAppDir) at /app/ and redirects `GET /` there. A path
 * under /app/ that is no file is a page of the app (it routes in the browser), so it gets
 * index.html; a missing asset is a 404. Before Nest's router, so nothing else answers these
 * paths, and nothing here sends CORS headers.
 */
export function webAppMiddleware(config: KilnConfig) {
  const root = config.webAppDir;
  const headers = webAppHeaders(config);
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const url = req.path;
    const isRoot = url === '/';
    if (!isRoot && url !== '/app' && !url.startsWith(WEB_APP_PATH)) return next();
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    if (isRoot || url === '/app') {
      res.redirect(302, WEB_APP_PATH);
      return;
    }
    try {
      const relative = decodeURIComponent(url.slice(WEB_APP_PATH.length));
      const file = path.resolve(root, relative);
      if (relative !== '' && file.startsWith(root + path.sep) && (await isFile(file))) {
        const immutable = relative.startsWith(ASSETS_PREFIX);
        res.setHeader('Cache-Control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
        res.sendFile(file, { dotfiles: 'deny' }, (err) => err && !res.headersSent && next(err));
        return;
      }
      if (relative.startsWith(ASSETS_PREFIX)) return sendError(res, 404, ErrorCode.NotFound, 'No such asset of the web app');
      const index = path.join(root, 'index.html');
      if (!existsSync(index)) {
        return sendError(res, 404, ErrorCode.NotFound, 'The web app is not built here: run npm run build (or set WEB_APP_DIR)');
      }
      // Every page is index.html: no-cache so a new build's asset names are picked up at once.
      res.setHeader('Cache-Control', 'no-cache');
      res.sendFile(index, (err) => err && !res.headersSent && next(err));
    } catch {
      sendError(res, 400, ErrorCode.InvalidRequest, 'Malformed path');
    }
  };
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

function sendError(res: Response, status: number, code: ErrorCode, message: string): void {
  res.status(status).json({ error: { code, message } });
}
