import type { Request, Response } from 'express';
import { hasBody, jsonBodyParser, jsonDepthExceeds } from './body-parser.middleware';

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
    const req = {
      method: 'GET',
      headers: { authorization: 'Bearer x' },
      complete: false,
      socket: { readable: true },
    } as unknown as Request;
    const next = jest.fn();
    jsonBodyParser()(req, {} as Response, next);
    expect(next).toHaveBeenCalledTimes(1);
    expect(next).toHaveBeenCalledWith();
    // body-parser, had it run, would have defined req.body.
    expect('body' in req).toBe(false);
  });

  it('jsonDepthExceeds counts open arrays and objects outside strings', () => {
    const depth = (text: string, max: number) => jsonDepthExceeds(Buffer.from(text, 'utf8'), max);
    expect(depth('{"a":[1,{"b":2}]}', 3)).toBe(false);
    expect(depth('{"a":[1,{"b":2}]}', 2)).toBe(true);
    expect(depth('[[],[],[],[]]', 2)).toBe(false); // siblings do not add up
    expect(depth('{"a":"[[[[[{{{{"}', 1)).toBe(false); // brackets inside a string
    expect(depth('{"a":"\\\\"}', 1)).toBe(false); // an escaped backslash ends before the closing quote
    expect(depth('{"a":"\\"[[[["}', 1)).toBe(false); // an escaped quote does not end the string
    expect(depth('{"\u00e9\u6f22\ud83d\ude00":[[1]]}', 3)).toBe(false); // multi-byte UTF-8
    expect(depth('['.repeat(100_000) + ']'.repeat(100_000), 32)).toBe(true);
    expect(depth('['.repeat(32) + ']'.repeat(32), 32)).toBe(false);
  });
});
