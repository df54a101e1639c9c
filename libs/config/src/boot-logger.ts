import type { LoggerService } from '@nestjs/common';
import pino from 'pino';
import { ConfigurationError } from './env.schema';

/**
 * JSON lines in pino's format, for what is said before the app's own pino logger is attached
 * (Nest's start-up messages, a failed boot, the CLI's migrate): in a container every line on
 * stdout and stderr is JSON, so log collectors never meet a coloured or bare line.
 */
export const bootLogger = pino({ level: 'info' });

/** Nest's logger interface over bootLogger; apps pass it to NestFactory until nestjs-pino takes over. */
export class BootLogger implements LoggerService {
  log(message: unknown, context?: string): void {
    bootLogger.info({ context: contextOf(context) }, text(message));
  }
  error(message: unknown, ...rest: unknown[]): void {
    // Nest calls error(message, stack?, context?).
    const [stack, context] = rest.length >= 2 ? rest : [undefined, rest[0]];
    // Nest's report of a failed create(); the app's exitOnBootFailure reports it once, better.
    if (context === 'ExceptionHandler') return;
    bootLogger.error({ context: contextOf(context), ...(typeof stack === 'string' ? { stack } : {}) }, text(message));
  }
  warn(message: unknown, context?: string): void {
    bootLogger.warn({ context: contextOf(context) }, text(message));
  }
  debug(message: unknown, context?: string): void {
    bootLogger.debug({ context: contextOf(context) }, text(message));
  }
  verbose(message: unknown, context?: string): void {
    bootLogger.trace({ context: contextOf(context) }, text(message));
  }
  fatal(message: unknown, context?: string): void {
    bootLogger.fatal({ context: contextOf(context) }, text(message));
  }
}

/** Logs why the process could not start, as one JSON line, and exits with status 1. */
export function exitOnBootFailure(err: unknown, context: string): never {
  // Configuration errors name the variable in their message; a stack would only hide it.
  if (err instanceof ConfigurationError) {
    bootLogger.fatal({ context, problems: err.problems }, err.message);
  } else if (err instanceof BootDependencyError) {
    // Which service, where, and why: the cause is the whole story; a stack would bury it.
    // uptimeMs: how long the process tried, from its start (the bound is 10 s).
    bootLogger.fatal(
      { context, service: err.service, host: err.host, cause: err.causeText, uptimeMs: Math.round(process.uptime() * 1000) },
      err.message,
    );
  } else {
    const message = err instanceof Error ? err.message : String(err);
    bootLogger.fatal({ context, ...(err instanceof Error ? { stack: err.stack } : {}) }, message);
  }
  // pino writes stdout synchronously, so the line is out before the exit.
  process.exit(1);
}

/** PostgreSQL or Redis could not be reached while the process started. */
export class BootDependencyError extends Error {
  constructor(
    readonly service: 'PostgreSQL' | 'Redis',
    readonly host: string,
    readonly causeText: string,
  ) {
    super(`${service} at ${host} is not reachable: ${causeText}`);
    this.name = 'BootDependencyError';
  }
}

/** host:port of a connection URL, never its credentials. */
export function hostOf(url: string, defaultPort: number): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname || 'localhost'}:${parsed.port || defaultPort}`;
  } catch {
    return '(unparseable URL)';
  }
}

function contextOf(context: unknown): string | undefined {
  return typeof context === 'string' ? context : undefined;
}

function text(message: unknown): string {
  if (message instanceof Error) return message.message;
  return typeof message === 'string' ? message : JSON.stringify(message);
}

/**
 * Where the apps' own loggers (nestjs-pino) write: stdout, asynchronously. A line goes to the
 * kernel as soon as the write before it is done, so under load many lines leave in one
 * write instead of a system call each (an access line per request was about 15 % of the
 * api's CPU on conditional polls, bench/findings.md), and on a quiet process each line still
 * leaves at once. pino flushes what is left when the process exits; a SIGKILL can lose the
 * lines queued behind the write in flight. Boot failures keep bootLogger's synchronous writes.
 */
export function appLogDestination(): pino.DestinationStream {
  return pino.destination({ dest: 1, sync: false });
}
