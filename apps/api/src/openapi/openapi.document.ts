import { INestApplication } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorResponseDto } from '../common/error.response.dto';
import { addExamples } from './openapi.examples';
import { addAdminErrors, addCommonHeaders, addServiceUnavailable, errorsAsJson } from './openapi.common';

/** Where the document and its browsable reference are served (outside the /v1 prefix for the page). */
export const OPENAPI_JSON_PATH = 'v1/openapi.json';
export const API_REFERENCE_PATH = 'docs';

/**
 * Operation ids read verb first (`createBatch`, `listDashboardKeys`), as generated clients and
 * the SDK's types use them. Every route names its own in @ApiOperation; this fallback keeps a
 * route that forgets one legible (`AdminQueuesController.queues` -> `adminQueuesQueues`) and
 * the OpenAPI spec's naming test then points at it.
 */
export function operationIdFallback(controllerKey: string, methodKey: string): string {
  const noun = controllerKey.replace(/Controller$/, '');
  return noun.charAt(0).toLowerCase() + noun.slice(1) + methodKey.charAt(0).toUpperCase() + methodKey.slice(1);
}

export function buildOpenApi(app: INestApplication): OpenAPIObject {
  const config = app.get<KilnConfig>(KILN_CONFIG);
  const builder = new DocumentBuilder()
    .setTitle('Kiln')
    .setDescription(
      'Bulk image generation. Public API under /v1 (API keys), dashboard under /v1/dashboard (session tokens), operator API under /v1/admin (ADMIN_TOKEN). ' +
        'Every answer carries X-Request-Id; API-key and session routes carry the RateLimit-* headers; 429 and 503 carry Retry-After. ' +
        'Errors are always { "error": { "code", "message", "details"? } }.',
    )
    .setVersion('1.0.0')
    .addServer(config.publicBaseUrl, 'This Kiln (PUBLIC_BASE_URL)')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'kiln_live_ API key' }, 'apiKey')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'Dashboard session token' }, 'session')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'Operator ADMIN_TOKEN' }, 'adminToken')
    .build();
  // As package.json says (UNLICENSED: no licence granted, as npm defines it); redocly's
  // recommended rules want the field and its url present.
  builder.info.license = { name: 'UNLICENSED', url: 'https://docs.npmjs.com/cli/v11/configuring-npm/package-json#license' };
  const document = SwaggerModule.createDocument(app, builder, {
    extraModels: [ErrorResponseDto],
    operationIdFactory: operationIdFallback,
  });
  errorsAsJson(document);
  addAdminErrors(document);
  addServiceUnavailable(document);
  addCommonHeaders(document);
  addExamples(document);
  return document;
}

/**
 * `GET /v1/openapi.json` and a Swagger UI page at `/docs`. The page's scripts and styles come
 * from swagger-ui-dist on this server (no CDN), the document is inlined into its init script,
 * and the public validator badge is off, so the page makes no request to another host.
 */
export function serveApiReference(app: NestExpressApplication, document: OpenAPIObject): void {
  SwaggerModule.setup(API_REFERENCE_PATH, app, document, {
    raw: ['json'],
    jsonDocumentUrl: OPENAPI_JSON_PATH,
    customSiteTitle: 'Kiln API reference',
    swaggerOptions: { validatorUrl: null, persistAuthorization: false, displayOperationId: true },
  });
}
