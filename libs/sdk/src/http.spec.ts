import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { Kiln } from './client';
import { KilnApiError, KilnConnectionError } from './errors';

/** A local server answering each request with the next of `answers`; records what it got. */
async function scriptedServer(answers: ((req: http.IncomingMessage, res: http.ServerResponse) => void)[]) {
  const seen: { method: string; url: string; at: number; headers: http.IncomingHttpHeaders }[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, at: Date.now(), headers: req.headers });
    req.resume();
    const answer = answers.shift();
    if (answer) answer(req, res);
    else res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_req: http.IncomingMessage, res: http.ServerResponse) =>
    res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-Id': `req-${status}`, ...headers }).end(JSON.stringify(body));
const refusal = (code: string) => ({ error: { code, message: `${code} happened`, details: { why: code } } });
const cut = (req: http.IncomingMessage) => req.socket.destroy();
const me = { user: { id: 'u' } };

describe('SDK requests: retries, backoff and errors', () => {
  it('429: waits the Retry-After seconds, then succeeds', async () => {
    const s = await scriptedServer([json(429, refusal('rate_limited'), { 'Retry-After': '1' }), json(200, me)]);
    try {
      const result = await new Kiln({ baseUrl: s.url, apiKey: 'k' }).me();
      expect(result).toEqual(me);
      expect(s.seen).toHaveLength(2);
      expect(s.seen[1].at - s.seen[0].at).toBeGreaterThanOrEqual(950);
    } finally {
      await s.close();
    }
  });

  it('503 and a 500 on a read are retried; the last answer is thrown once retries run out', async () => {
    const s = await scriptedServer([
      json(503, refusal('service_unavailable'), { 'Retry-After': '0' }),
      json(500, refusal('internal_error')),
      json(500, refusal('internal_error')),
    ]);
    try {
      const err = await new Kiln({ baseUrl: s.url, apiKey: 'k', maxRetries: 2 }).me().catch((e) => e);
      expect(err).toBeInstanceOf(KilnApiError);
      expect(err).toMatchObject({ code: 'internal_error', status: 500, requestId: 'req-500', details: { why: 'internal_error' } });
      expect(s.seen).toHaveLength(3);
    } finally {
      await s.close();
    }
  });

  it('a dropped connection on a create is retried with the same Idempotency-Key', async () => {
    const created = { id: 'b1', total: 1, creditsCharged: 3, status: 'pending' };
    const s = await scriptedServer([cut, json(201, created)]);
    try {
      const result = await new Kiln({ baseUrl: s.url, apiKey: 'k' }).batches.create({ model: 'm', prompts: ['p'] });
      expect(result).toEqual(created);
      expect(s.seen.map((r) => r.headers['idempotency-key'])).toEqual([expect.any(String), s.seen[0].headers['idempotency-key']]);
    } finally {
      await s.close();
    }
  });

  it('409 idempotency_key_in_use is retried after its Retry-After; 4xx refusals are not', async () => {
    const created = { id: 'b1', total: 1, creditsCharged: 3, status: 'pending' };
    const s = await scriptedServer([
      json(409, refusal('idempotency_key_in_use'), { 'Retry-After': '0' }),
      json(201, created),
      json(402, refusal('insufficient_credits')),
    ]);
    try {
      const sdk = new Kiln({ baseUrl: s.url, apiKey: 'k' });
      expect(await sdk.batches.create({ model: 'm', prompts: ['p'] }, { idempotencyKey: 'x' })).toEqual(created);
      await expect(sdk.batches.create({ model: 'm', prompts: ['p'] })).rejects.toMatchObject({ code: 'insufficient_credits', status: 402 });
      expect(s.seen).toHaveLength(3);
    } finally {
      await s.close();
    }
  });

  it('a request that is not safe to repeat (webhook create) is not resent after a dropped connection', async () => {
    const s = await scriptedServer([cut, json(201, {})]);
    try {
      const err = await new Kiln({ baseUrl: s.url, apiKey: 'k' }).webhooks.create({ url: 'https://example.com/h' }).catch((e) => e);
      expect(err).toBeInstanceOf(KilnConnectionError);
      expect(s.seen).toHaveLength(1);
    } finally {
      await s.close();
    }
  });

  it('a request with no answer in time is abandoned (timeoutMs) and reported as a connection error', async () => {
    const s = await scriptedServer([() => undefined, () => undefined]);
    try {
      const err = await new Kiln({ baseUrl: s.url, apiKey: 'k', timeoutMs: 200, maxRetries: 1 }).me().catch((e) => e);
      expect(err).toMatchObject({
        name: 'KilnConnectionError',
        code: 'connection_failed',
        message: expect.stringContaining('no answer in time'),
      });
      expect(s.seen).toHaveLength(2);
    } finally {
      await s.close();
    }
  });

  it('sends the key as a bearer token; reads KILN_URL and KILN_API_KEY when not given', async () => {
    const s = await scriptedServer([json(200, me)]);
    const saved = { url: process.env.KILN_URL, key: process.env.KILN_API_KEY };
    process.env.KILN_URL = s.url;
    process.env.KILN_API_KEY = 'kiln_live_from_env';
    try {
      await new Kiln().me();
      expect(s.seen[0].headers.authorization).toBe('Bearer kiln_live_from_env');
      delete process.env.KILN_API_KEY;
      expect(() => new Kiln()).toThrow(/KILN_API_KEY/);
    } finally {
      process.env.KILN_URL = saved.url;
      process.env.KILN_API_KEY = saved.key;
      if (saved.url === undefined) delete process.env.KILN_URL;
      if (saved.key === undefined) delete process.env.KILN_API_KEY;
      await s.close();
    }
  });
});
