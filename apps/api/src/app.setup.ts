import { INestApplication, RequestMethod } from '@nestjs/common';
import type { Express } from 'express';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { jsonBodyParser } from './errors/body-parser.middleware';
import { kilnValidationPipe } from './errors/validation';
import { ErrorResponseDto } from './common/error.response.dto';

/** Paths outside /v1: probes and public files. */
export const UNVERSIONED_PATHS = [
  { path: 'healthz', method: RequestMethod.GET },
  { path: 'readyz', method: RequestMethod.GET },
  { path: 'files/{*path}', method: RequestMethod.GET },
];

/**
 * Everything main.ts does to the app, shared with the e2e tests so they exercise the same
 * stack. Created with `bodyParser: false`: Kiln parses JSON itself to keep its error object.
 */
export function configureApp(app: NestExpressApplication): OpenAPIObject {
  app.useLogger(app.get(Logger));
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(jsonBodyParser());
  app.setGlobalPrefix('v1', { exclude: UNVERSIONED_PATHS });
  app.useGlobalPipes(kilnValidationPipe());
  app.enableShutdownHooks();
  const document = buildOpenApi(app);
  const http = app.getHttpAdapter().getInstance() as Express;
  http.get('/v1/openapi.json', (_req, res) => res.json(document));
  return document;
}

export function buildOpenApi(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Kiln')
    .setDescription(
      'Bulk image generation. Public API under /v1 (API keys), dashboard under /v1/dashboard (session tokens), operator API under /v1/admin (ADMIN_TOKEN).',
    )
    .setVersion('1.0.0')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'kiln_live_ API key' }, 'apiKey')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'Dashboard session token' }, 'session')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'Operator ADMIN_TOKEN' }, 'adminToken')
    .build();
  return SwaggerModule.createDocument(app, config, { extraModels: [ErrorResponseDto] });
}
