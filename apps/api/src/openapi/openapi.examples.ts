import type {
  MediaTypeObject,
  OpenAPIObject,
  ReferenceObject,
  RequestBodyObject,
  ResponseObject,
  SchemaObject,
} from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { operationsOf } from './openapi.common';

/*
 * Every JSON request body and response gets an example, built from its schema: a property's
 * own `example` first, then its default, its first enum value, or a plain value of its type.
 * Built rather than hand-written, so an example can never disagree with the schema beside it,
 * and routes added later get theirs too. Property examples on the DTOs make them realistic.
 */

type Schema = SchemaObject | ReferenceObject;

function resolve(document: OpenAPIObject, schema: Schema): SchemaObject {
  if (!('$ref' in schema)) return schema;
  const name = schema.$ref.replace('#/components/schemas/', '');
  const found = document.components?.schemas?.[name];
  if (!found) throw new Error(`OpenAPI: unresolved reference ${schema.$ref}`);
  return resolve(document, found);
}

export function sampleOf(document: OpenAPIObject, schema: Schema, depth = 0): unknown {
  const s = resolve(document, schema);
  if (s.example !== undefined) return s.example;
  if (s.default !== undefined) return s.default;
  if (s.enum?.length) return s.enum[0];
  if (depth > 8) return null;
  if (s.allOf?.length) return Object.assign({}, ...s.allOf.map((part) => sampleOf(document, part, depth + 1)));
  if (s.oneOf?.length) return sampleOf(document, s.oneOf[0], depth + 1);
  if (s.anyOf?.length) return sampleOf(document, s.anyOf[0], depth + 1);
  if (s.nullable) return null;
  switch (s.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, prop] of Object.entries(s.properties ?? {})) out[key] = sampleOf(document, prop, depth + 1);
      return out;
    }
    case 'array':
      return s.items ? [sampleOf(document, s.items, depth + 1)] : [];
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 1;
    case 'boolean':
      return true;
    case 'string':
      return s.format === 'binary' ? undefined : 'string';
    default:
      return s.properties ? sampleOf(document, { ...s, type: 'object' }, depth) : {};
  }
}

function addTo(document: OpenAPIObject, content: Record<string, MediaTypeObject> | undefined): void {
  const json = content?.['application/json'];
  if (!json?.schema || json.example !== undefined || json.examples !== undefined) return;
  json.example = sampleOf(document, json.schema);
}

const ERROR_SCHEMA = '#/components/schemas/ErrorResponseDto';

/**
 * An error answer's example names the code its description leads with (`insufficient_credits,
 * daily_credit_cap_exceeded` -> insufficient_credits), not the first code of the whole table.
 */
function errorExample(document: OpenAPIObject, response: ResponseObject): unknown {
  const codes = (document.components?.schemas?.ErrorObjectDto as SchemaObject | undefined)?.properties?.code as SchemaObject | undefined;
  const known = new Set<string>((codes?.enum as string[] | undefined) ?? []);
  const code = (response.description.match(/[a-z]+(?:_[a-z]+)+|[a-z]+/g) ?? []).find((word) => known.has(word));
  return code ? { error: { code, message: response.description } } : undefined;
}

export function addExamples(document: OpenAPIObject): void {
  for (const { operation } of operationsOf(document)) {
    addTo(document, (operation.requestBody as RequestBodyObject | undefined)?.content);
    for (const response of Object.values(operation.responses) as ResponseObject[]) {
      const json = response.content?.['application/json'];
      if (json && json.example === undefined && (json.schema as ReferenceObject | undefined)?.$ref === ERROR_SCHEMA) {
        json.example = errorExample(document, response);
      }
      addTo(document, response.content);
    }
  }
}
