import type { OpenAPIObject, OperationObject, ResponseObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';

/*
 * Headers every route shares, documented once here rather than on each decorator, so routes
 * added later carry them too: X-Request-Id on every answer (and accepted on every request),
 * RateLimit-* wherever a key or session is metered, Retry-After on 429 and 503.
 */

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export function operationsOf(document: OpenAPIObject): { path: string; method: string; operation: OperationObject }[] {
  const found: { path: string; method: string; operation: OperationObject }[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of HTTP_METHODS) {
      const operation = (item as Record<string, OperationObject | undefined>)[method];
      if (operation) found.push({ path, method, operation });
    }
  }
  return found;
}

const HEADERS = {
  'X-Request-Id': {
    description:
      "The request's X-Request-Id when it was 1 to 128 characters of [A-Za-z0-9._:-], otherwise a new UUID. Quote it when reporting a problem: the server logs under it.",
    required: true,
    schema: { type: 'string', example: '5f0c2a6e-8d1b-4c3e-9a57-2b4f1e0d7c91' },
  },
  'RateLimit-Limit': {
    description: "The window's budget: the plan's requests per minute for this key (or session).",
    schema: { type: 'integer', example: 120 },
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current window.',
    schema: { type: 'integer', example: 119 },
  },
  'RateLimit-Reset': {
    description: 'Whole seconds until the window resets (at least 1).',
    schema: { type: 'integer', example: 42 },
  },
  'Retry-After': {
    description: 'Whole seconds to wait before retrying.',
    required: true,
    schema: { type: 'integer', example: 5 },
  },
} as const;

type HeaderName = keyof typeof HEADERS;

const ref = (name: HeaderName) => ({ $ref: `#/components/headers/${name}` });

function isMetered(operation: OperationObject): boolean {
  return (operation.security ?? []).some((s) => 'apiKey' in s || 'session' in s);
}

export function addCommonHeaders(document: OpenAPIObject): void {
  document.components = document.components ?? {};
  document.components.headers = { ...(document.components.headers ?? {}), ...HEADERS };
  document.components.parameters = {
    ...(document.components.parameters ?? {}),
    RequestId: {
      name: 'X-Request-Id',
      in: 'header',
      required: false,
      description: 'Your own id for this request (1 to 128 characters of [A-Za-z0-9._:-]); echoed back and logged.',
      schema: { type: 'string', maxLength: 128, pattern: '^[A-Za-z0-9._:-]{1,128}$' },
    },
  };
  for (const { operation } of operationsOf(document)) {
    operation.parameters = [...(operation.parameters ?? []), { $ref: '#/components/parameters/RequestId' }];
    const metered = isMetered(operation);
    for (const [status, response] of Object.entries(operation.responses) as [string, ResponseObject][]) {
      const headers: Record<string, unknown> = { ...(response.headers ?? {}), 'X-Request-Id': ref('X-Request-Id') };
      // An unauthenticated request is refused before the limiter counts it.
      if (metered && status !== '401') {
        for (const name of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const) headers[name] = ref(name);
      }
      // And any other answer documented as carrying it (409 idempotency_key_in_use).
      if (status === '429' || status === '503' || /Retry-After/.test(response.description)) headers['Retry-After'] = ref('Retry-After');
      response.headers = headers as ResponseObject['headers'];
    }
  }
}

const errorContent = { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponseDto' } } };

/** PostgreSQL or Redis out of reach answers 503 on any route; the client retries after Retry-After. */
export function addServiceUnavailable(document: OpenAPIObject): void {
  for (const { operation } of operationsOf(document)) {
    if (operation.responses['503']) continue;
    operation.responses['503'] = {
      description: 'service_unavailable: PostgreSQL or Redis cannot be reached; retry after Retry-After',
      content: errorContent,
    };
  }
}

/** The operator routes' shared refusals (AdminGuard and the validation pipe). */
export function addAdminErrors(document: OpenAPIObject): void {
  for (const { operation } of operationsOf(document)) {
    if (!(operation.security ?? []).some((s) => 'adminToken' in s)) continue;
    operation.responses['400'] ??= { description: 'invalid_request', content: errorContent };
    operation.responses['401'] ??= { description: 'unauthorized: missing or wrong ADMIN_TOKEN', content: errorContent };
    operation.responses['404'] ??= { description: 'not_found: no such resource, or ADMIN_TOKEN is not configured', content: errorContent };
    operation.responses['429'] ??= { description: 'rate_limited: too many failed admin tokens from this address', content: errorContent };
  }
}

/**
 * Errors are always JSON, even from a route that produces something else (@ApiProduces applies
 * to every answer of the route, so a zip route would otherwise document its 404 as a zip).
 */
export function errorsAsJson(document: OpenAPIObject): void {
  for (const { operation } of operationsOf(document)) {
    for (const [status, response] of Object.entries(operation.responses) as [string, ResponseObject][]) {
      if (status.startsWith('2') || !response.content || response.content['application/json']) continue;
      const schema = Object.values(response.content).find((media) => media.schema)?.schema;
      response.content = schema ? { 'application/json': { schema } } : errorContent;
    }
  }
}
