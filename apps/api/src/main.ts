import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ApiModule } from './api.module';
import { configureApp } from './app.setup';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create<NestExpressApplication>(ApiModule, { bodyParser: false, bufferLogs: true });
  configureApp(app);
  const config = app.get<KilnConfig>(KILN_CONFIG);
  await app.listen(config.port, '0.0.0.0');
}

bootstrap().catch((err) => {
  // Configuration errors name the variable; print them plainly, not as a stack trace.
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
