import SwaggerParser from '@apidevtools/swagger-parser';
import { buildConfig } from '@app/config';
import { bootTestApp, TestApp } from '@app/testing';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { generateTypes, redoclyLint, typeCheck } from './helpers/openapi-typescript';

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function operations(doc: any): { path: string; method: string; op: any }[] {
  return Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] })),
  );
}

jest.setTimeout(120_000);

/** OpenAPI 3.0 schema -> JSON Schema for ajv: `nullable: true` becomes a null alternative. */
function jsonSchemaOf(node: any): any {
  if (Array.isArray(node)) return node.map(jsonSchemaOf);
  if (!node || typeof node !== 'object') return node;
  const out: any = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, jsonSchemaOf(v)]));
  if (out.nullable === true) {
    delete out.nullable;
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    if (out.enum) out.enum = [...out.enum, null];
    if (!out.type) return { anyOf: [out, { type: 'null' }] };
  }
  return out;
}

/** Local component references point into the document registered with ajv as 'doc'. */
function refsInto(schema: any): any {
  return JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, '"doc#/components/'));
}

/** The OpenAPI document as a contract clients generate code from (docs/api.md). */
describe('OpenAPI document and the /docs reference', () => {
  let t: TestApp;
  let doc: any;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
    doc = (
      await t.http
        .get('/v1/openapi.json')
        .expect(200)
        .expect('Content-Type', /application\/json/)
    ).body;
  });
  afterAll(() => t.close());

  it('passes swagger-parser validation with zero errors', async () => {
    // validate() dereferences in place: give it a copy.
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeDefined();
  });

  it('passes redocly lint with its recommended rules: no error, no warning', async () => {
    const problems = await redoclyLint(doc);
    expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${JSON.stringify(p.location)}`)).toEqual([]);
  });

  it('every example, request and response, is valid against the schema beside it', () => {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema({ components: jsonSchemaOf(doc.components) }, 'doc');
    const problems: string[] = [];
    const check = (where: string, media: any) => {
      if (!media?.schema || media.example === undefined) return;
      const validate = ajv.compile(refsInto(jsonSchemaOf(media.schema)));
      if (!validate(media.example)) problems.push(`${where}: ${ajv.errorsText(validate.errors)}`);
    };
    for (const { path, method, op } of operations(doc)) {
      const where = `${method.toUpperCase()} ${path}`;
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) check(`${where} request ${type}`, media);
      for (const [status, res] of Object.entries<any>(op.responses)) {
        for (const [type, media] of Object.entries(res.content ?? {})) check(`${where} ${status} ${type}`, media);
      }
    }
    for (const [name, schema] of Object.entries<any>(doc.components.schemas)) {
      for (const [prop, sub] of Object.entries<any>(schema.properties ?? {})) {
        if (sub.example !== undefined) check(`${name}.${prop}`, { schema: sub, example: sub.example });
      }
    }
    expect(problems).toEqual([]);
  });

  it('names every operation verb first, uniquely; the public ones as clients call them', () => {
    const ids = operations(doc).map(({ op }) => op.operationId as string);
    expect(ids.every((id) => /^[a-z]+(?:[A-Z][a-z]*)+$/.test(id))).toBe(true);
    expect(ids.filter((id) => /Controller|_/.test(id))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    const byRoute = Object.fromEntries(operations(doc).map(({ path, method, op }) => [`${method.toUpperCase()} ${path}`, op.operationId]));
    expect(byRoute).toMatchObject({
      'POST /v1/batches': 'createBatch',
      'GET /v1/batches': 'listBatches',
      'GET /v1/batches/{id}': 'getBatch',
      'GET /v1/models': 'listModels',
      'GET /v1/me': 'getMe',
      'POST /v1/uploads': 'uploadFiles',
      'GET /v1/dashboard/batches': 'listDashboardBatches',
      'GET /v1/admin/accounts': 'listAdminAccounts',
    });
    // Dashboard and operator twins say where they live after the verb: createDashboardBatch.
    const areaFirst = ids.filter((id) => /^(dashboard|admin)[A-Z]/.test(id));
    expect(areaFirst).toEqual([]);
  });

  it('points its server at PUBLIC_BASE_URL', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: buildConfig(process.env).publicBaseUrl })]);
  });

  it('gives every operation a success schema, an example per JSON body, and the error object elsewhere', () => {
    const problems: string[] = [];
    for (const { path, method, op } of operations(doc)) {
      const where = `${method.toUpperCase()} ${path}`;
      const success = Object.entries(op.responses).filter(([s]) => s.startsWith('2')) as [string, any][];
      if (success.length === 0) problems.push(`${where}: no 2xx response`);
      for (const [status, res] of Object.entries<any>(op.responses)) {
        if (status === '204' || status === '304') continue; // no body by definition
        const json = res.content?.['application/json'];
        // A success may be something else (the archive's zip), with its schema.
        const other = status.startsWith('2') && !json ? (Object.values(res.content ?? {})[0] as any) : null;
        if (other) {
          if (!other.schema) problems.push(`${where} ${status}: no schema`);
        } else if (!json?.schema) problems.push(`${where} ${status}: no JSON schema`);
        else if (json.example === undefined) problems.push(`${where} ${status}: no example`);
        if (!status.startsWith('2') && json?.schema?.$ref !== '#/components/schemas/ErrorResponseDto')
          problems.push(`${where} ${status}: not the error object`);
      }
      const body = op.requestBody?.content?.['application/json'];
      if (body && body.example === undefined) problems.push(`${where}: request body without an example`);
      if (!op.responses['503']) problems.push(`${where}: 503 undocumented`);
    }
    expect(problems).toEqual([]);
  });

  it('examples come from the schemas: a created batch example has the fields and types of the schema', () => {
    const created = doc.paths['/v1/batches'].post;
    const body = created.requestBody.content['application/json'].example;
    expect(body).toEqual(expect.objectContaining({ prompts: expect.any(Array), model: expect.any(String) }));
    const answer = created.responses['201'].content['application/json'].example;
    expect(Object.keys(answer).sort()).toEqual(Object.keys(doc.components.schemas.CreatedBatchResponseDto.properties).sort());
  });

  it('error examples carry the code their answer is documented with', () => {
    const create = doc.paths['/v1/batches'].post.responses;
    expect(create['402'].content['application/json'].example.error.code).toBe('insufficient_credits');
    expect(create['429'].content['application/json'].example.error.code).toBe('rate_limited');
    expect(create['503'].content['application/json'].example.error.code).toBe('service_unavailable');
    expect(doc.paths['/v1/batches/{id}'].get.responses['404'].content['application/json'].example.error.code).toBe('not_found');
  });

  it('marks required and optional fields as the server treats them', () => {
    const create = doc.components.schemas.CreateBatchRequestDto;
    expect(create.required.sort()).toEqual(['model', 'prompts']);
    const error = doc.components.schemas.ErrorObjectDto;
    expect(error.required.sort()).toEqual(['code', 'message']);
    // Nullable fields are always present: required, with null allowed.
    const batch = doc.components.schemas.BatchDto;
    expect(batch.required).toEqual(expect.arrayContaining(['note', 'previewUrl', 'background', 'counts', 'status', 'done']));
    expect(batch.properties.note.nullable).toBe(true);
  });

  it('documents X-Request-Id on every answer, RateLimit-* on metered routes, Retry-After on 429 and 503', async () => {
    for (const { op } of operations(doc)) {
      expect(op.parameters).toEqual(expect.arrayContaining([{ $ref: '#/components/parameters/RequestId' }]));
      for (const res of Object.values<any>(op.responses)) expect(res.headers['X-Request-Id']).toBeDefined();
      if (op.responses['429']) expect(op.responses['429'].headers['Retry-After']).toBeDefined();
      expect(op.responses['503'].headers['Retry-After']).toBeDefined();
    }
    const create = doc.paths['/v1/batches'].post.responses;
    expect(Object.keys(create['201'].headers)).toEqual(
      expect.arrayContaining(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']),
    );
    expect(create['401'].headers['RateLimit-Limit']).toBeUndefined();
    expect(doc.components.headers['Retry-After'].schema.type).toBe('integer');
    // The client contract's headers: Idempotency-Key on create (409 says when to retry).
    const createOp = doc.paths['/v1/batches'].post;
    expect(createOp.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'Idempotency-Key', in: 'header' })]));
    expect(create['201'].headers['Idempotent-Replayed']).toBeDefined();
    expect(create['409'].headers['Retry-After']).toBeDefined();
    // And the server really sends what the document says.
    const res = await t.http.get('/v1/me').set('X-Request-Id', 'doc-check-1');
    expect(res.headers['x-request-id']).toBe('doc-check-1');
  });

  it('documents conditional and long polling of a batch: If-None-Match, Prefer, ETag, 304', () => {
    const poll = doc.paths['/v1/batches/{id}'].get;
    const pollHeaders = poll.parameters.filter((p: any) => p.in === 'header').map((p: any) => p.name);
    expect(pollHeaders).toEqual(expect.arrayContaining(['If-None-Match', 'Prefer']));
    expect(poll.responses['200'].headers.ETag).toBeDefined();
    expect(poll.responses['304']).toBeDefined();
  });

  it('types generated by openapi-typescript type-check a small client, and catch a wrong one', async () => {
    const types = await generateTypes(doc);
    expect(types).toContain('createBatch');
    const client = `
      import type { paths, components } from './openapi';
      type CreateBody = paths['/v1/batches']['post']['requestBody'] extends { content: { 'application/json': infer B } } | undefined ? B : never;
      type Created = paths['/v1/batches']['post']['responses'][201]['content']['application/json'];
      type Detail = paths['/v1/batches/{id}']['get']['responses'][200]['content']['application/json'];
      type ApiError = components['schemas']['ErrorResponseDto'];
      export async function submit(base: string, key: string, body: CreateBody): Promise<Detail> {
        const headers = { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' };
        const res = await fetch(base + '/v1/batches', { method: 'POST', headers, body: JSON.stringify(body) });
        if (res.status !== 201) throw new Error(((await res.json()) as ApiError).error.code);
        const created = (await res.json()) as Created;
        const detail = (await (await fetch(base + '/v1/batches/' + created.id, { headers })).json()) as Detail;
        const done: boolean = detail.batch.done;
        const urls: string[] = detail.tasks.flatMap((t) => t.resultUrls);
        return done && urls.length >= 0 ? detail : detail;
      }
      submit('http://localhost:8080', 'k', { prompts: ['a fox'], model: 'eta-image', countPerCombo: 2 });
    `;
    expect(await typeCheck({ 'openapi.d.ts': types, 'client.ts': client })).toBe('');
    const wrong = client.replace('countPerCombo: 2', "countPerCombo: 'two'").replace('detail.batch.done', 'detail.batch.finished');
    const errors = await typeCheck({ 'openapi.d.ts': types, 'client.ts': wrong });
    expect(errors).toMatch(/countPerCombo|string.*number/);
    expect(errors).toMatch(/finished/);
  });

  it('serves Swagger UI at /docs from this server only', async () => {
    const page = await t.http
      .get('/docs')
      .expect(200)
      .expect('Content-Type', /text\/html/);
    const refs = [...page.text.matchAll(/(?:src|href)=['"]([^'"]+)['"]/g)].map((m) => m[1]);
    expect(refs.length).toBeGreaterThan(2);
    expect(refs.filter((r) => /^(https?:)?\/\//.test(r))).toEqual([]);
    for (const ref of refs) await t.http.get(new URL(ref, 'http://x/docs').pathname).expect(200);
    const init = await t.http.get('/docs/swagger-ui-init.js').expect(200);
    expect(init.text).toContain('"operationId": "createBatch"');
    expect(init.text).toContain('"validatorUrl": null');
    // The only absolute URLs the page's script holds are the document's own server and schema URIs.
    const urls = [...init.text.matchAll(/https?:\/\/[^\s"'\\)]+/g)].map((m) => m[0]);
    const base = buildConfig(process.env).publicBaseUrl;
    // The licence's url is a link a reader may follow, never a resource the page loads.
    const links = new Set([doc.info.license.url]);
    expect(urls.filter((u) => !u.startsWith(base) && !links.has(u) && !/kiln\.test|localhost|example/.test(u))).toEqual([]);
  });
});
