import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { Kiln } from '@app/sdk';
import { waitUpTo } from './mcp.server';

const batch = (done: boolean) => ({
  id: 'b',
  done,
  total: 1,
  counts: { pending: done ? 0 : 1, running: 0, succeeded: done ? 1 : 0, failed: 0 },
});
const doneDetail = { batch: batch(true), tasks: [{ id: 't', status: 'succeeded' }] };

/** A local Kiln: `events` answers GET /v1/batches/b/events; GET /v1/batches/b answers `detail`. */
async function server(events: (res: http.ServerResponse) => void, detail: object = doneDetail) {
  const seen: { url: string; prefer?: string }[] = [];
  const open = new Set<http.ServerResponse>();
  const s = http.createServer((req, res) => {
    seen.push({ url: req.url!, prefer: req.headers.prefer as string | undefined });
    if (req.url!.endsWith('/events')) {
      open.add(res);
      return events(res);
    }
    res
      .writeHead(200, { 'Content-Type': 'application/json', ETag: 'W/"b-9"', 'Preference-Applied': 'wait=30' })
      .end(JSON.stringify(detail));
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const kiln = new Kiln({ baseUrl: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, apiKey: 'k', maxRetries: 0 });
  const close = () => {
    for (const res of open) res.destroy();
    return new Promise<void>((resolve) => s.close(() => resolve()));
  };
  return { kiln, seen, close };
}

/** What a tool call's handler is given, with the progress notifications it sends. */
function extra(progressToken?: string) {
  const notes: { progress: number; total?: number }[] = [];
  return {
    notes,
    value: {
      signal: new AbortController().signal,
      _meta: progressToken === undefined ? undefined : { progressToken },
      sendNotification: (n: { params: { progress: number; total?: number } }) => {
        notes.push({ progress: n.params.progress, total: n.params.total });
        return Promise.resolve();
      },
    } as unknown as Parameters<typeof waitUpTo>[3],
  };
}

describe('kiln mcp waits for a batch by its progress stream, long polling as the fallback', () => {
  it('follows the stream, sending a progress notification per batch event, then reads the detail once; no long poll', async () => {
    const s = await server((res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.end(
        `id: 1:\nevent: batch\ndata: ${JSON.stringify(batch(false))}\n\n` +
          `id: 1:0\nevent: task\ndata: ${JSON.stringify(doneDetail.tasks[0])}\n\n` +
          `id: 2:0;done\nevent: batch\ndata: ${JSON.stringify(batch(true))}\n\n`,
      );
    });
    try {
      const e = extra('p1');
      expect(await waitUpTo(s.kiln, 'b', 30, e.value)).toEqual(doneDetail);
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/batches/b/events', '/v1/batches/b']);
      expect(s.seen.some((r) => r.prefer)).toBe(false);
      expect(e.notes).toEqual([
        { progress: 0, total: 1 },
        { progress: 1, total: 1 },
      ]);
    } finally {
      await s.close();
    }
  });

  it('a Kiln without the stream (404) is long-polled instead', async () => {
    const s = await server((res) =>
      res
        .writeHead(404, { 'Content-Type': 'application/json' })
        .end(JSON.stringify({ error: { code: 'not_found', message: 'Cannot GET' } })),
    );
    try {
      expect(await waitUpTo(s.kiln, 'b', 30, extra().value)).toEqual(doneDetail);
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/batches/b/events', '/v1/batches/b']);
      expect(s.seen[1].prefer).toMatch(/^wait=\d+$/);
    } finally {
      await s.close();
    }
  });

  it('a batch not done when the wait ends comes back as it is then, read once more', async () => {
    const running = { batch: batch(false), tasks: [{ id: 't', status: 'pending' }] };
    const s = await server((res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(`id: 1:\nevent: batch\ndata: ${JSON.stringify(batch(false))}\n\n`);
    }, running);
    try {
      expect(await waitUpTo(s.kiln, 'b', 1, extra().value)).toEqual(running);
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/batches/b/events', '/v1/batches/b']);
      expect(s.seen.some((r) => r.prefer)).toBe(false);
    } finally {
      await s.close();
    }
  });
});
