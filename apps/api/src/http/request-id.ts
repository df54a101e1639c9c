import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Echo a sane client X-Request-Id, else mint one; every response carries it. Runs as the
 * first middleware, so even answers made before Nest's logger middleware (the body parser's)
 * carry one; pino-http then reuses the same id for the request's log lines.
 */
export function requestId(req: IncomingMessage, res: ServerResponse): string {
  // pino-http types the id loosely (string, number or object); Kiln sets it only here, as a string.
  if (typeof req.id === 'string') return req.id;
  const given = req.headers['x-request-id'];
  const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
  req.id = id;
  res.setHeader('X-Request-Id', id);
  return id;
}

export function assignRequestId(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  requestId(req, res);
  next();
}
