import type { Request, Response } from 'express';
import { hasBody, jsonBodyParser } from './body-parser.middleware';

describe('jsonBodyParser', () => {
  it('hasBody: a content-length (even 0) or a transfer-encoding, as type-is decides', () => {
    expect(hasBody({ headers: {} })).toBe(false);
    expect(hasBody({ headers: { 'content-length': '0' } })).toBe(true);
    expect(hasBody({ headers: { 'content-length': '12' } })).toBe(true);
    expect(hasBody({ headers: { 'content-length': 'abc' } })).toBe(false);
    expect(hasBody({ headers: { 'transfer-encoding': 'chunked' } })).toBe(true);
  });

  it('passes a request without a body straight on, without running body-parser', () => {
    // An unfinished incoming message, as on-finished sees it, so body-parser would not skip it itself.
    const req = { method: 'GET', headers: { authorization: 'Bearer x' }, complete: false, socket: { readable: true } } as unknown as Request;
    const next = jest.fn();
    jsonBodyParser()(req, {} as Response, next);
    expect(next).toHaveBeenCalledTimes(1);
    expect(next).toHaveBeenCalledWith();
    // body-parser, had it run, would have defined req.body.
    expect('body' in req).toBe(false);
  });
});
