import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { Kiln } from '@app/sdk';
import { waitForBatch } from './follow';

const batch = (done: boolean) => ({
  id: 'b',
  done,
  total: 1,
  counts: { pending: done ? 0 : 1, running: 0, succeeded: done ? 1 : 0, failed: 0 },
});
const detail = { batch: batch(true), tasks: [{ id: 't', status: 'succeeded' }] };

/** A local Kiln: `events` answers GET /v1/batches/b/events; GET /v1/batches/b answers the done batch. */
async function server(events: (res: http.ServerResponse) => void) {
  const seen: { url: string; prefer?: string }[] = [];
  const s = http.createServer((req, res) => {
    seen.push({ url: req.url!, prefer: req.headers.prefer as string | undefined });
    if (req.url!.endsWith('/events')) return events(res);
    res
      .writeHead(200, { 'Content-Type': 'application/json', ETag: 'W/"b-9"', 'Preference-Applied': 'wait=30' })
      .end(JSON.stringify(detail));
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const kiln = new Kiln({ baseUrl: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, apiKey: 'k', maxRetries: 0 });
  return { kiln, seen, close: () => new Promise<void>((resolve) => s.close(() => resolve())) };
}

describe('kiln --wait: the progress stream, with long polling as the fallback', () => {
  it('follows the stream, reporting each batch event, then reads the detail once', async () => {
    const s = await server((res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.end(
        `id: 1:\nevent: batch\ndata: ${JSON.stringify(batch(false))}\n\n` +
          `id: 1:0\nevent: task\ndata: ${JSON.stringify(detail.tasks[0])}\n\n` +
          `id: 2:0;done\nevent: batch\ndata: ${JSON.stringify(batch(true))}\n\n`,
      );
    });
    try {
      const progress: boolean[] = [];
      const got = await waitForBatch(s.kiln, 'b', { onProgress: (d) => progress.push(d.batch.done) });
      expect(got).toEqual(detail);
      expect(progress).toEqual([false, true]);
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/batches/b/events', '/v1/batches/b']);
      expect(s.seen.some((r) => r.prefer)).toBe(false);
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
      const got = await waitForBatch(s.kiln, 'b');
      expect(got).toEqual(detail);
      expect(s.seen.map((r) => r.url)).toEqual(['/v1/batches/b/events', '/v1/batches/b']);
      expect(s.seen[1].prefer).toMatch(/^wait=\d+$/);
    } finally {
      await s.close();
    }
  });
});
