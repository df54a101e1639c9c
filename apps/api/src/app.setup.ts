import { RequestMethod } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { OpenAPIObject } from '@nestjs/swagger';
import { Logger } from 'nestjs-pino';
import { ConfigurationError, KILN_CONFIG, KilnConfig } from '@app/config';
import { KilnMetrics } from '@app/metrics';
import { DeferredBodyErrorInterceptor, jsonBodyParser, rawBodyParser } from './errors/body-parser.middleware';
import { assignRequestId } from './http/request-id';
import { limitHttpServer, securityHeaders } from './http/http-server-limits';
import { kilnValidationPipe } from './errors/validation';
import { buildOpenApi, serveApiReference } from './openapi/openapi.document';
import { httpMetricsMiddleware } from './metrics/api-metrics';
import { webAppMiddleware } from './http/web-app';

/** Paths outside /v1: probes and public files. */
export const UNVERSIONED_PATHS = [
  { path: 'healthz', method: RequestMethod.GET },
  { path: 'readyz', method: RequestMethod.GET },
  { path: 'metrics', method: RequestMethod.GET },
  { path: 'files/{*path}', method: RequestMethod.GET },
];

/**
 * Everything main.ts does to the app, shared with the e2e tests so they exercise the same
 * stack. Created with `bodyParser: false`: Kiln parses JSON itself to keep its error object.
 */
export function configureApp(app: NestExpressApplication): OpenAPIObject {
  const config = app.get<KilnConfig>(KILN_CONFIG);
  // Before pino takes over: Nest's own report of this refusal is left to the boot logger,
  // which leaves it to exitOnBootFailure's one message.
  trustProxies(app, config.trustProxy);
  app.useLogger(app.get(Logger));
  app.disable('x-powered-by');
  // Express would tag every GET body with its own ETag and answer If-None-Match itself; a
  // batch's poll has Kiln's (made without reading the body), and nothing else has one.
  app.set('etag', false);
  app.set('query parser', 'simple');
  limitHttpServer(app.getHttpServer(), config.http);
  // First, so every answer carries them, the body parser's refusals included.
  app.use(assignRequestId);
  app.use(httpMetricsMiddleware(app.get(KilnMetrics)));
  app.use(securityHeaders);
  app.use(webAppMiddleware(config));
  app.use(rawBodyParser());
  app.use(jsonBodyParser());
  app.setGlobalPrefix('v1', { exclude: UNVERSIONED_PATHS });
  app.useGlobalInterceptors(new DeferredBodyErrorInterceptor());
  app.useGlobalPipes(kilnValidationPipe());
  app.enableShutdownHooks();
  const document = buildOpenApi(app);
  serveApiReference(app, document);
  return document;
}

/**
 * req.ip is the client's address only if the proxies in front are trusted to say it
 * (X-Forwarded-For); the dashboard's sign-in limits per IP depend on it. Express checks the
 * list when it is set, so a bad address stops the api at start, named.
 */
function trustProxies(app: NestExpressApplication, setting: KilnConfig['trustProxy']): void {
  try {
    app.set('trust proxy', setting);
  } catch (err) {
    throw new ConfigurationError([{ variable: 'TRUST_PROXY', value: String(setting), rule: (err as Error).message }]);
  }
}
