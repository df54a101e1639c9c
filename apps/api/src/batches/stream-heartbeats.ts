/** The part of a response the heartbeats use. */
export interface HeartbeatTarget {
  write(chunk: string): boolean;
  readonly destroyed: boolean;
}

/**
 * Heartbeats of the open progress streams: one timer for all of them, not one per stream, and
 * a comment line only to a stream that wrote nothing for `quietMs`. With a timer each, 1,000
 * streams opened together wrote 1,000 heartbeats in one burst every 15 s, in the middle of the
 * events they were sending anyway (bench/findings.md, 2026-11-28 session 5). A quiet stream
 * goes between quietMs and quietMs + tickMs without a byte.
 */
export class StreamHeartbeats<T extends HeartbeatTarget = HeartbeatTarget> {
  private readonly lastWrites = new Map<T, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly quietMs: number,
    private readonly tickMs: number,
  ) {}

  get open(): number {
    return this.lastWrites.size;
  }

  /** A stream starts: it is sent heartbeats until removed. */
  add(stream: T, now = Date.now()): void {
    this.lastWrites.set(stream, now);
    if (this.timer) return;
    this.timer = setInterval(() => this.beat(), this.tickMs);
    // A heartbeat never keeps the process alive on its own.
    this.timer.unref();
  }

  /** The stream wrote something: it needs no heartbeat for a while. */
  wrote(stream: T, now = Date.now()): void {
    if (this.lastWrites.has(stream)) this.lastWrites.set(stream, now);
  }

  remove(stream: T): void {
    this.lastWrites.delete(stream);
    if (this.lastWrites.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
  }

  /** One tick: a comment line to each stream quiet for quietMs or more. */
  beat(now = Date.now()): void {
    for (const [stream, at] of this.lastWrites) {
      if (now - at < this.quietMs || stream.destroyed) continue;
      stream.write(': keepalive\n\n');
      this.lastWrites.set(stream, now);
    }
  }
}
