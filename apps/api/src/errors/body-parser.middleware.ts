import express, { NextFunction, Request, Response } from 'express';
import { ErrorCode } from '@app/errors';

export const MAX_JSON_BYTES = 1024 * 1024;

/**
 * JSON parsing with Kiln's error object: body-parser's own errors (malformed JSON, a body
 * over 1 MB, an unsupported charset) would otherwise reach Express's HTML error page.
 */
export function jsonBodyParser() {
  const parse = express.json({ limit: MAX_JSON_BYTES, strict: true });
  return (req: Request, res: Response, next: NextFunction) => {
    // Polling GETs carry no body: spare them body-parser's per-request work.
    if (!hasBody(req)) return next();
    parse(req, res, (err?: { type?: string; status?: number; message?: string }) => {
      if (!err) {
        if (req.body !== undefined && req.is('application/json') && (typeof req.body !== 'object' || Array.isArray(req.body))) {
          return sendInvalid(res, 'The JSON body must be an object', { field: 'body', reason: 'not_an_object' });
        }
        return next();
      }
      const reason =
        err.type === 'entity.too.large'
          ? 'too_large'
          : err.type === 'entity.parse.failed'
            ? 'malformed_json'
            : err.type ?? 'unreadable_body';
      const message =
        reason === 'too_large'
          ? `The JSON body is larger than ${MAX_JSON_BYTES} bytes`
          : reason === 'malformed_json'
            ? 'The request body is not valid JSON'
            : 'The request body could not be read';
      return sendInvalid(res, message, { field: 'body', reason });
    });
  };
}

/** type-is's hasBody, the test body-parser makes before reading: a length or a chunked body. */
export function hasBody(req: Pick<Request, 'headers'>): boolean {
  return req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length']));
}

function sendInvalid(res: Response, message: string, details: Record<string, unknown>): void {
  res.status(400).json({ error: { code: ErrorCode.InvalidRequest, message, details } });
}
