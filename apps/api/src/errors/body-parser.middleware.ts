import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import express, { NextFunction, Request, Response } from 'express';
import { Observable } from 'rxjs';
import { invalidRequest, KilnError } from '@app/errors';

export const MAX_JSON_BYTES = 1024 * 1024;
/** Far deeper than any Kiln body (a model's provider route is three levels). */
export const MAX_JSON_DEPTH = 32;

/**
 * JSON parsing with Kiln's error object: body-parser's own errors (malformed JSON, a body
 * over 1 MB, an unsupported charset) would otherwise reach Express's HTML error page.
 * The raw bytes are checked first (verify runs before JSON.parse): a body nested deeper than
 * MAX_JSON_DEPTH is refused in one linear scan, before the parser and then the validation
 * pipe would each walk it, and UTF-8 is the only charset (RFC 8259 8.1), which is what lets
 * the scan read bytes.
 *
 * A refusal is not answered here but kept on the request and thrown by
 * DeferredBodyErrorInterceptor, after the guards: authentication and the rate limit come
 * before the body's shape, as the documented validation order says, and the body is never
 * parsed for a caller who would be refused anyway.
 */
export function jsonBodyParser() {
  const parse = express.json({ limit: MAX_JSON_BYTES, strict: true, verify: checkRawJson });
  return (req: Request, res: Response, next: NextFunction) => {
    // Polling GETs carry no body: spare them body-parser's per-request work.
    if (!hasBody(req)) return next();
    parse(req, res, (err?: { type?: string; status?: number; message?: string }) => {
      if (!err) {
        if (req.body !== undefined && req.is('application/json') && (typeof req.body !== 'object' || Array.isArray(req.body))) {
          return defer(req, next, 'The JSON body must be an object', 'not_an_object');
        }
        return next();
      }
      const reason =
        err.type === 'entity.too.large'
          ? 'too_large'
          : err.type === 'entity.parse.failed'
            ? 'malformed_json'
            : err.type === TOO_DEEP || err.type === UNSUPPORTED_CHARSET
              ? err.type
              : (err.type ?? 'unreadable_body');
      const message =
        reason === 'too_large'
          ? `The JSON body is larger than ${MAX_JSON_BYTES} bytes`
          : reason === 'malformed_json'
            ? 'The request body is not valid JSON'
            : reason === TOO_DEEP
              ? `The JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`
              : reason === UNSUPPORTED_CHARSET
                ? 'A JSON body must be UTF-8'
                : 'The request body could not be read';
      return defer(req, next, message, reason);
    });
  };
}

/** The route whose body must reach its handler as the bytes that were sent (a signature covers them). */
export const RAW_BODY_PATH = '/v1/stripe/webhook';

/**
 * The Stripe webhook's body as a Buffer, untouched: its signature is an HMAC over the exact
 * bytes, which JSON.parse and a re-serialisation would not give back. Same size limit and
 * error object as JSON bodies; body-parser marks the request read, so jsonBodyParser then
 * leaves it alone.
 */
export function rawBodyParser() {
  const parse = express.raw({ type: () => true, limit: MAX_JSON_BYTES });
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'POST' || req.path !== RAW_BODY_PATH || !hasBody(req)) return next();
    parse(req, res, (err?: { type?: string }) => {
      if (!err) return next();
      if (err.type === 'entity.too.large') return defer(req, next, `The body is larger than ${MAX_JSON_BYTES} bytes`, 'too_large');
      return defer(req, next, 'The request body could not be read', err.type ?? 'unreadable_body');
    });
  };
}

const TOO_DEEP = 'too_deep';
const UNSUPPORTED_CHARSET = 'unsupported_charset';

/** body-parser's verify hook: a thrown error's `type` comes back to the handler above. */
function checkRawJson(_req: unknown, _res: unknown, buf: Buffer, encoding: string): void {
  if (encoding.toLowerCase() !== 'utf-8' && encoding.toLowerCase() !== 'utf8') {
    throw Object.assign(new Error('unsupported charset'), { type: UNSUPPORTED_CHARSET });
  }
  if (jsonDepthExceeds(buf, MAX_JSON_DEPTH)) throw Object.assign(new Error('JSON too deep'), { type: TOO_DEEP });
}

/**
 * True when the UTF-8 JSON text opens more than `max` arrays or objects at once. Bytes, not
 * characters: in UTF-8 no byte of a multi-byte character is an ASCII bracket, quote or
 * backslash. Malformed text gets some answer here and is refused by the parser anyway.
 */
export function jsonDepthExceeds(buf: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next byte (an escaped quote ends nothing)
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** type-is's hasBody, the test body-parser makes before reading: a length or a chunked body. */
export function hasBody(req: Pick<Request, 'headers'>): boolean {
  return req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length']));
}

const BODY_ERROR = Symbol('kiln:body-error');
type WithBodyError = Request & { [BODY_ERROR]?: KilnError };

function defer(req: Request, next: NextFunction, message: string, reason: string): void {
  (req as WithBodyError)[BODY_ERROR] = invalidRequest('body', reason, message);
  req.body = undefined;
  next();
}

/** Throws the body parser's refusal once the guards have let the request through. */
@Injectable()
export class DeferredBodyErrorInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const error = context.switchToHttp().getRequest<WithBodyError>()[BODY_ERROR];
    if (error) throw error;
    return next.handle();
  }
}
