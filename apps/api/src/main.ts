import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Logger } from 'nestjs-pino';
import { BootLogger, buildConfig, exitOnBootFailure, KILN_CONFIG, KilnConfig } from '@app/config';
import { RedisService } from '@app/redis';
import { ApiModule } from './api.module';
import { configureApp } from './app.setup';

async function bootstrap(): Promise<void> {
  // Checked before Nest starts, so a bad environment is one message, not Nest's report too.
  buildConfig();
  // BootLogger until configureApp attaches pino: a failed boot is a JSON line too.
  const app = await NestFactory.create<NestExpressApplication>(ApiModule, {
    bodyParser: false,
    bufferLogs: true,
    // A failed boot rejects here and is logged once by exitOnBootFailure, without Nest's own report.
    abortOnError: false,
    logger: new BootLogger(),
  });
  configureApp(app);
  const config = app.get<KilnConfig>(KILN_CONFIG);
  for (const warning of config.warnings) app.get(Logger).warn(warning, 'Config');
  await app.listen(config.port, '0.0.0.0');
  // Without Redis the api still serves what PostgreSQL alone can (reads, the catalog, the
  // dashboard), so it starts, but says loudly that it is not ready until Redis answers.
  const redis = app.get(RedisService);
  if (!redis.connected) {
    app
      .get(Logger)
      .error(
        `Started NOT READY: Redis at ${redis.host} is not reachable; /readyz answers 503 and no task reaches a generator until it is`,
        'Api',
      );
  }
}

bootstrap().catch((err) => exitOnBootFailure(err, 'Api'));
