/** The command line's exit codes (docs/cli.md). */
export enum ExitCode {
  /** Every image succeeded (or the command did what it was asked). */
  Ok = 0,
  /** Some images failed or were cancelled, or the service could not be reached. */
  Incomplete = 1,
  /** Bad arguments, an unreadable prompts file, no API key. */
  Usage = 2,
  /** The service refused a request; its error code and message are printed. */
  Refused = 3,
  /** Stopped by Ctrl-C; running the same command again resumes. */
  Interrupted = 130,
}

/** Wrong use of the command: printed without a stack, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The reason given to aborted work on Ctrl-C: exit 130, no stack. */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';

  constructor() {
    super('Interrupted');
  }
}
