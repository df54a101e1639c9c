import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import { builtinFontRenders } from '@app/providers';
import { BootLogger, buildConfig, exitOnBootFailure, KILN_CONFIG, KilnConfig } from '@app/config';
import { GeneratorHealthServer } from './health.server';
import { GeneratorModule } from './generator.module';

/** Margin past the grace period for closing connections before the process gives up. */
const CLOSE_MARGIN_MS = 10_000;

async function bootstrap(): Promise<void> {
  // Checked before Nest starts, so a bad environment is one message, not Nest's report too.
  buildConfig();
  // Signals are caught from the very start: jobs are taken as soon as the context is up,
  // before create() returns, and a SIGTERM in that window must still drain them.
  let pendingSignal: NodeJS.Signals | null = null;
  let onSignal = (signal: NodeJS.Signals): void => {
    pendingSignal ??= signal;
  };
  process.on('SIGTERM', (s) => onSignal(s));
  process.on('SIGINT', (s) => onSignal(s));

  // An application context, not an HTTP app: the generator only consumes the queue.
  // BootLogger until pino is attached: a failed boot is a JSON line too.
  const app = await NestFactory.createApplicationContext(GeneratorModule, {
    bufferLogs: true,
    abortOnError: false,
    logger: new BootLogger(),
  });
  const logger = app.get(Logger);
  app.useLogger(logger);
  const config = app.get<KilnConfig>(KILN_CONFIG);
  for (const warning of config.warnings) logger.warn(warning, 'Config');
  // Every model's default route is the builtin renderer: without a font its text is tofu.
  const fonts = await builtinFontRenders();
  if (!fonts.ok) {
    logger.error(
      'Builtin renders will show empty boxes instead of text: no usable font (install fontconfig and fonts-dejavu-core)',
      'Generator',
    );
  }
  const health = app.get(GeneratorHealthServer);
  await health.listen();

  // A bug that leaves a promise rejection unhandled must not kill every task in flight here;
  // it is logged loudly instead.
  process.on('unhandledRejection', (reason) => {
    logger.error(`Unhandled promise rejection: ${reason instanceof Error ? reason.stack : String(reason)}`, 'Generator');
  });

  let closing = false;
  onSignal = (signal) => {
    if (closing) return;
    closing = true;
    health.shuttingDown();
    logger.log(`${signal}: finishing in-flight tasks (up to ${config.generator.shutdownGraceMs} ms)`, 'Generator');
    setTimeout(() => {
      logger.error('Shutdown did not complete in time; exiting', 'Generator');
      process.exit(1);
    }, config.generator.shutdownGraceMs + CLOSE_MARGIN_MS).unref();
    // app.close() runs TasksProcessor.beforeApplicationShutdown (stop taking jobs, drain
    // within the grace period), then closes the queue, Redis and the database.
    app.close().then(
      () => process.exit(0),
      (err) => {
        logger.error(`Shutdown failed: ${(err as Error).message}`, 'Generator');
        process.exit(1);
      },
    );
  };
  logger.log('Generator started', 'Generator');
  if (pendingSignal) onSignal(pendingSignal);
}

bootstrap().catch((err) => exitOnBootFailure(err, 'Generator'));
