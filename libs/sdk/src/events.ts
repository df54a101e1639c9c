import { KilnApiError, KilnConnectionError } from './errors';
import { KilnHttp, sleep } from './http';
import type { Batch, Task } from './types';

/** One event of a batch's progress stream (GET /v1/batches/{id}/events). */
export type BatchEvent = { type: 'task'; id: string; task: Task } | { type: 'batch'; id: string; batch: Batch };

export interface EventsOptions {
  signal?: AbortSignal;
  /** Resume after this event id (an event's `id`), as a reconnect does. */
  lastEventId?: string;
}

/** A raw Server-Sent Event: what the stream's fields say, before Kiln's meaning is applied. */
export interface SseMessage {
  event: string;
  data: string;
  /** The last id the stream set, as the spec carries it over to later events. */
  id: string;
  /** A `retry:` field, if this block had one. */
  retry?: number;
}

/**
 * An incremental Server-Sent Events parser (the WHATWG event stream format): feed it text as
 * it arrives, in any chunking; it returns the events each chunk completes. Comment lines
 * (heartbeats) are skipped; `retry` is reported on the next event.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private retry: number | undefined;
  /** The id of the last event dispatched, carried across events as EventSource does: what a reconnect resumes from. */
  lastEventId: string;
  /** An id field seen in the event being read: it counts only once that event is complete. */
  private idBuffer: string;

  constructor(lastEventId = '') {
    this.lastEventId = lastEventId;
    this.idBuffer = lastEventId;
  }

  feed(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (!m || (m[0] === '\r' && m.index === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const message = this.line(line);
      if (message) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | null {
    if (line === '') {
      this.lastEventId = this.idBuffer;
      if (this.data.length === 0) {
        this.event = '';
        return null;
      }
      const message: SseMessage = { event: this.event || 'message', data: this.data.join('\n'), id: this.lastEventId };
      if (this.retry !== undefined) message.retry = this.retry;
      this.data = [];
      this.event = '';
      this.retry = undefined;
      return message;
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.idBuffer = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.retry = Number(value);
    return null;
  }
}

/** A stream silent this long (no heartbeat either; the server sends one every 15 s) is taken as dropped. */
const IDLE_MS = 45_000;
/** Before the first reconnect, unless the server said otherwise (`retry:`). */
const RECONNECT_MS = 1000;
/** Reconnects in a row that bring no event before the iterator gives up. */
const MAX_FRUITLESS_RECONNECTS = 5;

/**
 * A batch's progress stream as parsed events. A dropped connection (a network error, an api
 * restart, a silent line) reconnects with Last-Event-ID, so no task event is lost or repeated;
 * the iterator ends after the batch event that says done. Errors the server answers (404,
 * 403, 400) are thrown as KilnApiError; a 404 from a Kiln without the stream too.
 */
export async function* batchEvents(http: KilnHttp, batchId: string, options: EventsOptions = {}): AsyncGenerator<BatchEvent> {
  const path = `/v1/batches/${encodeURIComponent(batchId)}/events`;
  const parser = new SseParser(options.lastEventId ?? '');
  let reconnectMs = RECONNECT_MS;
  let fruitless = 0;
  for (;;) {
    const idle = new AbortController();
    const headers: Record<string, string> = { Accept: 'text/event-stream' };
    if (parser.lastEventId) headers['Last-Event-ID'] = parser.lastEventId;
    let res: Response;
    try {
      res = await http.send('GET', path, {
        headers,
        repeatable: true,
        stream: true,
        signal: options.signal ? AbortSignal.any([options.signal, idle.signal]) : idle.signal,
      });
    } catch (err) {
      // A connection that failed after retries: counted like a drop, unless nothing ever worked.
      if (
        (err instanceof KilnApiError && !(err instanceof KilnConnectionError)) ||
        options.signal?.aborted ||
        ++fruitless > MAX_FRUITLESS_RECONNECTS
      )
        throw err;
      await sleep(reconnectMs, options.signal);
      continue;
    }
    // Resumed after the done event: the server has nothing left to send.
    if (res.status === 204 || !res.body) return;
    if (!/text\/event-stream/.test(res.headers.get('content-type') ?? '')) {
      await res.body.cancel().catch(() => undefined);
      throw new KilnApiError('http_error', `GET ${path} did not answer an event stream`, res.status, undefined, undefined);
    }
    let timer = setTimeout(() => idle.abort(), IDLE_MS);
    const decoder = new TextDecoder();
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        clearTimeout(timer);
        timer = setTimeout(() => idle.abort(), IDLE_MS);
        for (const message of parser.feed(decoder.decode(value, { stream: true }))) {
          if (message.retry !== undefined) reconnectMs = message.retry;
          const event = toEvent(message);
          if (!event) continue;
          fruitless = 0;
          yield event;
          if (event.type === 'batch' && event.batch.done) return;
        }
      }
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason ?? err;
      // A dropped line: resumed below from the last id.
    } finally {
      clearTimeout(timer);
      reader.releaseLock();
      await res.body.cancel().catch(() => undefined);
    }
    if (++fruitless > MAX_FRUITLESS_RECONNECTS) {
      throw new KilnConnectionError(`GET ${path}: the stream kept dropping before the batch was done`, undefined);
    }
    await sleep(reconnectMs, options.signal);
  }
}

function toEvent(m: SseMessage): BatchEvent | null {
  if (m.event === 'task') return { type: 'task', id: m.id, task: JSON.parse(m.data) as Task };
  if (m.event === 'batch') return { type: 'batch', id: m.id, batch: JSON.parse(m.data) as Batch };
  // Event types a newer server may add are skipped, not fatal.
  return null;
}
