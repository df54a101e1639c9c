import type { Request, Response } from 'express';
import type { IssuedSession } from '@app/sessions';
import { invalidRequest } from '@app/errors';

/**
 * Sessions of the web app (apps/web) ride in a cookie instead of the Authorization header, so
 * the token never reaches page script: HttpOnly, SameSite=Strict, Secure over https, sent to
 * /v1/dashboard only. A client asks for one by sending `X-Kiln-Session: cookie` to signup or
 * login; it then gets the cookie and a body without the token.
 *
 * CSRF: every state-changing request authenticated by the cookie must carry that same header.
 * A cross-site form cannot set a header, and a cross-site fetch that sets one needs a CORS
 * preflight, which Kiln never answers; SameSite=Strict keeps the cookie off cross-site
 * requests in the first place. Bearer-token requests carry no ambient credential and are
 * not checked.
 */
export const SESSION_COOKIE = 'kiln_session';
export const SESSION_MODE_HEADER = 'x-kiln-session';
const COOKIE_PATH = '/v1/dashboard';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether signup or login asked for a cookie session (`X-Kiln-Session: cookie`). */
export function wantsCookieSession(req: Request): boolean {
  return (
    String(req.headers[SESSION_MODE_HEADER] ?? '')
      .trim()
      .toLowerCase() === 'cookie'
  );
}

/** The session token of the cookie, if any (the first one named kiln_session). */
export function readSessionCookie(req: Request): string | null {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return value.length > 0 ? value : null;
    }
  }
  return null;
}

/** Refuses a cookie-authenticated write without the web app's header: changes nothing. */
export function checkCsrf(req: Request): void {
  if (SAFE_METHODS.has(req.method) || wantsCookieSession(req)) return;
  throw invalidRequest(
    'X-Kiln-Session',
    'csrf_header_missing',
    'A request authenticated by the session cookie that changes state must send X-Kiln-Session: cookie',
  );
}

export function setSessionCookie(req: Request, res: Response, session: IssuedSession): void {
  res.cookie(SESSION_COOKIE, session.token, {
    httpOnly: true,
    sameSite: 'strict',
    secure: req.secure,
    path: COOKIE_PATH,
    expires: session.expiresAt,
  });
}

export function clearSessionCookie(req: Request, res: Response): void {
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', secure: req.secure, path: COOKIE_PATH });
}
