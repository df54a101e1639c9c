import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { Kiln } from './client';
import { KilnApiError } from './errors';
import { BatchEvent, SseParser } from './events';

describe('SseParser', () => {
  it('parses events in any chunking: CRLF, CR and LF, comments, multi-line data, ids carried over, retry', () => {
    const text = ': hello\r\nretry: 2000\nid: 1:0\nevent: task\ndata: {"a":\ndata: 1}\n\n:keepalive\n\nevent: batch\rdata: x\r\r\n';
    for (const size of [1, 2, 3, 7, text.length]) {
      const parser = new SseParser();
      const out = [];
      for (let i = 0; i < text.length; i += size) out.push(...parser.feed(text.slice(i, i + size)));
      expect(out).toEqual([
        { event: 'task', data: '{"a":\n1}', id: '1:0', retry: 2000 },
        { event: 'batch', data: 'x', id: '1:0' },
      ]);
    }
  });

  it('a block without data dispatches nothing; a field without a colon is a field with an empty value', () => {
    const parser = new SseParser('start');
    expect(parser.feed('event: task\n\ndata\n\n')).toEqual([{ event: 'message', data: '', id: 'start' }]);
  });
});

/** A local SSE server answering each request with the next of `answers`; records the Last-Event-ID each one carried. */
async function sseServer(answers: ((res: http.ServerResponse) => void)[]) {
  const lastIds: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    lastIds.push(req.headers['last-event-id'] as string | undefined);
    const answer = answers.shift();
    if (answer) answer(res);
    else res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, lastIds, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const task = (id: string, seq: number) => `id: 0:0-${seq}\nevent: task\ndata: ${JSON.stringify({ id, status: 'succeeded' })}\n\n`;
const batch = (version: number, done: boolean) => `id: ${version}:0-1\nevent: batch\ndata: ${JSON.stringify({ id: 'b', done })}\n\n`;
const head = (res: http.ServerResponse) => res.writeHead(200, { 'Content-Type': 'text/event-stream' });

describe('kiln.batches.events', () => {
  it('yields parsed events, reconnects after a dropped connection with Last-Event-ID, and ends after the done batch event', async () => {
    const s = await sseServer([
      (res) => {
        head(res);
        // Split mid-event, then dropped before the second event completes.
        res.write('retry: 10\n\n' + task('t1', 0).slice(0, 9));
        setTimeout(() => {
          res.write(task('t1', 0).slice(9) + task('t2', 1).slice(0, 12));
          setTimeout(() => res.socket?.destroy(), 30);
        }, 30);
      },
      (res) => {
        head(res);
        res.end(task('t2', 1) + ': keepalive\n\n' + batch(5, true) + task('never', 9));
      },
    ]);
    try {
      const kiln = new Kiln({ baseUrl: s.url, apiKey: 'k' });
      const seen: BatchEvent[] = [];
      for await (const e of kiln.batches.events('b')) seen.push(e);
      expect(seen.map((e) => (e.type === 'task' ? e.task.id : `batch:${e.batch.done}`))).toEqual(['t1', 't2', 'batch:true']);
      expect(seen.map((e) => e.id)).toEqual(['0:0-0', '0:0-1', '5:0-1']);
      expect(s.lastIds).toEqual([undefined, '0:0-0']);
    } finally {
      await s.close();
    }
  });

  it('resumes from a given lastEventId; a 204 (resumed after done) ends at once; a 404 is thrown as the API error', async () => {
    const s = await sseServer([
      (res) => res.writeHead(204).end(),
      (res) =>
        res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { code: 'not_found', message: 'x' } })),
    ]);
    try {
      const kiln = new Kiln({ baseUrl: s.url, apiKey: 'k' });
      const seen = [];
      for await (const e of kiln.batches.events('b', { lastEventId: '5:0-1' })) seen.push(e);
      expect(seen).toEqual([]);
      expect(s.lastIds).toEqual(['5:0-1']);
      const err = await (async () => {
        for await (const e of kiln.batches.events('b')) void e;
      })().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KilnApiError);
      expect((err as KilnApiError).status).toBe(404);
    } finally {
      await s.close();
    }
  });
});
