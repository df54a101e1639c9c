import type { LoggerService } from '@nestjs/common';
import pino from 'pino';

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
  const message = err instanceof Error ? err.message : String(err);
  const stack = err instanceof Error && !message.startsWith('Invalid Kiln configuration') ? err.stack : undefined;
  bootLogger.fatal({ context, ...(stack ? { stack } : {}) }, message);
  process.exit(1);
}

function contextOf(context: unknown): string | undefined {
  return typeof context === 'string' ? context : undefined;
}

function text(message: unknown): string {
  if (message instanceof Error) return message.message;
  return typeof message === 'string' ? message : JSON.stringify(message);
}
