import { SingleBar } from 'cli-progress';

export interface ProgressSnapshot {
  total: number;
  /** Finished images: succeeded, failed or cancelled. */
  finished: number;
  failed: number;
  /** Credits charged less refunds so far. */
  credits: number;
}

/**
 * Progress on stderr: a bar on a terminal (images done / total, failed, credits, ETA),
 * otherwise one line per change, so logs of a pipeline stay readable.
 */
export interface ProgressReporter {
  update(snapshot: ProgressSnapshot): void;
  /** A message between updates (a line of its own). */
  note(message: string): void;
  stop(): void;
}

export function progressReporter(stream: NodeJS.WriteStream, quiet = false): ProgressReporter {
  if (quiet) return { update: () => undefined, note: () => undefined, stop: () => undefined };
  return stream.isTTY ? new BarReporter(stream) : new LineReporter(stream);
}

class LineReporter implements ProgressReporter {
  private last = '';

  constructor(private readonly stream: NodeJS.WritableStream) {}

  update(s: ProgressSnapshot): void {
    const line = `images ${s.finished}/${s.total}, failed ${s.failed}, credits ${s.credits}`;
    if (line === this.last) return;
    this.last = line;
    this.stream.write(`${line}\n`);
  }

  note(message: string): void {
    this.stream.write(`${message}\n`);
  }

  stop(): void {}
}

class BarReporter implements ProgressReporter {
  private readonly bar: SingleBar;
  private started = false;

  constructor(stream: NodeJS.WriteStream) {
    this.bar = new SingleBar({
      stream,
      format: '{bar} {value}/{total} images | failed {failed} | credits {credits} | ETA {eta_formatted}',
      hideCursor: true,
      etaBuffer: 20,
      clearOnComplete: false,
    });
  }

  update(s: ProgressSnapshot): void {
    const payload = { failed: s.failed, credits: s.credits };
    if (!this.started) {
      this.bar.start(s.total, s.finished, payload);
      this.started = true;
      return;
    }
    this.bar.setTotal(s.total);
    this.bar.update(s.finished, payload);
  }

  note(message: string): void {
    // cli-progress redraws on its own line; a message goes above it.
    if (this.started) this.bar.stop();
    process.stderr.write(`${message}\n`);
    if (this.started) this.started = false;
  }

  stop(): void {
    if (this.started) this.bar.stop();
    this.started = false;
  }
}
