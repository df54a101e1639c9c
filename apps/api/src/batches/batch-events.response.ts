import { applyDecorators } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiProduces, ApiResponse } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { BatchEvent, BatchEvents } from '@app/batches';
import { ErrorResponseDto } from '../common/error.response.dto';
import { StreamHeartbeats } from './stream-heartbeats';
import { BatchDto, TaskDto } from './dto/batch.response.dto';

/** A stream quiet this long gets a comment line, which keeps proxies and load balancers from closing it. */
export const HEARTBEAT_MS = 15_000;
/** How often the one heartbeat timer looks: a quiet stream goes 15 to 20 s without a byte. */
const HEARTBEAT_TICK_MS = 5000;
const heartbeats = new StreamHeartbeats<Response>(HEARTBEAT_MS, HEARTBEAT_TICK_MS);

/**
 * GET /v1/batches/{id}/events and its dashboard twin: the batch's progress as Server-Sent
 * Events (BatchEvents). The first read happens before anything is written, so a missing batch
 * or a refused cap answers with the error object; a stream resumed after its done event
 * answers 204, which tells an EventSource to stop reconnecting. Writes wait for the socket to
 * drain, so a slow reader holds one page of events, never the batch.
 */
export async function streamEvents(
  events: BatchEvents,
  req: Request,
  res: Response,
  who: { accountId: string; batchId: string; holder: string },
): Promise<void> {
  const left = new AbortController();
  const onClose = (): void => left.abort();
  res.on('close', onClose);
  const lastEventId = req.headers['last-event-id'];
  const stream = events.open({ ...who, lastEventId: Array.isArray(lastEventId) ? lastEventId[0] : lastEventId, signal: left.signal });
  try {
    const first = await stream.next();
    if (first.done) {
      res.status(204).end();
      return;
    }
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Accel-Buffering', 'no');
    res.setHeader('Connection', 'keep-alive');
    res.flushHeaders();
    // Tells an EventSource how long to wait before it reconnects after a drop.
    res.write('retry: 2000\n\n');
    heartbeats.add(res);
    await write(res, first.value);
    for (;;) {
      const next = await stream.next();
      if (next.done || left.signal.aborted) break;
      await write(res, next.value);
    }
    res.end();
  } catch (err) {
    // Before the headers the error filter answers with the error object; after them the
    // stream can only end, and the client resumes from its last event id.
    if (!res.headersSent) throw err;
    res.destroy();
  } finally {
    heartbeats.remove(res);
    res.off('close', onClose);
    await stream.return();
  }
}

/**
 * Each event's `event:` and `data:` lines, by the task or batch object it shows. A batch's
 * shared reader hands the same objects to each of its streams (BatchEvents), so each is
 * serialised once per read, not once per stream; only the id line is the stream's own.
 */
const bodies = new WeakMap<object, string>();

function frame(e: BatchEvent): string {
  const shown = e.type === 'task' ? e.task : e.batch;
  let body = bodies.get(shown);
  if (body === undefined) {
    body = `event: ${e.type}\ndata: ${JSON.stringify(e.type === 'task' ? TaskDto.from(e.task) : BatchDto.from(e.batch))}\n\n`;
    bodies.set(shown, body);
  }
  return `id: ${e.id}\n${body}`;
}

async function write(res: Response, events: BatchEvent[]): Promise<void> {
  if (events.length === 0 || res.destroyed) return;
  heartbeats.wrote(res);
  if (!res.write(events.map(frame).join(''))) {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
}

/** The OpenAPI description of the stream. */
export function ApiBatchEvents() {
  return applyDecorators(
    ApiProduces('text/event-stream'),
    ApiHeader({
      name: 'Last-Event-ID',
      required: false,
      description: "The id of the last event received: the stream resumes after it, without repeating or losing a task's event",
    }),
    ApiOkResponse({
      description:
        '`task` events (a task object, once per task when it reaches succeeded, failed or cancelled) and `batch` events ' +
        '(the batch object, when it changed), each with an id to resume from; comment lines as heartbeats; the stream ends ' +
        'after the batch event whose done is true. Counts against the same 20 held requests per key as long polls.',
      schema: { type: 'string', example: 'id: 3:0-4\nevent: task\ndata: {"id":"...","status":"succeeded",...}\n\n' },
    }),
    ApiResponse({ status: 204, description: 'Resumed after the done event: nothing left to send' }),
    ApiResponse({ status: 429, description: 'rate_limited: 20 held polls and streams already open for this key', type: ErrorResponseDto }),
  );
}
