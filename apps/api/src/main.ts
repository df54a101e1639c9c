import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Logger } from 'nestjs-pino';
import { BootLogger, exitOnBootFailure, KILN_CONFIG, KilnConfig } from '@app/config';
import { ApiModule } from './api.module';
import { configureApp } from './app.setup';

async function bootstrap(): Promise<void> {
  // BootLogger until configureApp attaches pino: a failed boot is a JSON line too.
  const app = await NestFactory.create<NestExpressApplication>(ApiModule, {
    bodyParser: false,
    bufferLogs: true,
    logger: new BootLogger(),
  });
  configureApp(app);
  const config = app.get<KilnConfig>(KILN_CONFIG);
  for (const warning of config.warnings) app.get(Logger).warn(warning, 'Config');
  await app.listen(config.port, '0.0.0.0');
}

bootstrap().catch((err) => exitOnBootFailure(err, 'Api'));
