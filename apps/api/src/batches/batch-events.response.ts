import { applyDecorators } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiProduces, ApiResponse } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { BatchEvent, BatchEvents } from '@app/batches';
import { ErrorResponseDto } from '../common/error.response.dto';
import { BatchDto, TaskDto } from './dto/batch.response.dto';

/** A comment line this often keeps proxies and load balancers from closing a quiet stream. */
export const HEARTBEAT_MS = 15_000;

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
  let heartbeat: NodeJS.Timeout | undefined;
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
    heartbeat = setInterval(() => res.write(': keepalive\n\n'), HEARTBEAT_MS);
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
    clearInterval(heartbeat);
    res.off('close', onClose);
    await stream.return();
  }
}

/**
 * An event's `data` line by the task or batch object it shows. The streams of a batch share
 * one reader, whose task and batch objects reach every stream: each is turned into JSON once,
 * not once per stream (100 streams of a batch, 100 times). Held weakly: an entry goes with its
 * object, once every stream has written it.
 */
const dataLines = new WeakMap<object, string>();

function dataOf(e: BatchEvent): string {
  const shown = e.type === 'task' ? e.task : e.batch;
  let data = dataLines.get(shown);
  if (data === undefined) {
    data = JSON.stringify(e.type === 'task' ? TaskDto.from(e.task) : BatchDto.from(e.batch));
    dataLines.set(shown, data);
  }
  return data;
}

function frame(e: BatchEvent): string {
  return `id: ${e.id}\nevent: ${e.type}\ndata: ${dataOf(e)}\n\n`;
}

async function write(res: Response, events: BatchEvent[]): Promise<void> {
  if (events.length === 0 || res.destroyed) return;
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
