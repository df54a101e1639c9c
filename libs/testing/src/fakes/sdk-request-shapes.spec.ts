import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { GeminiRoute, OpenAiRoute, pixelSize, ProviderContext, providerType, RenderRequest, SyncProviderType } from '@app/providers';
import type { CapturedRequest } from './fake-upstream';
import { GeminiFakeUpstream } from './gemini/gemini.fake';
import { OpenAiFakeUpstream } from './openai/openai.fake';

/**
 * Kiln's request shapes against the upstreams' official SDKs (devDependencies only): each SDK
 * and Kiln send the same inputs to the same capture server on 127.0.0.1, and the method, path,
 * auth header and body fields must agree. If an SDK release changes a shape, this fails first.
 */

const openaiType = providerType('openai') as SyncProviderType<OpenAiRoute>;
const geminiType = providerType('gemini') as SyncProviderType<GeminiRoute>;
const KEY = 'sdk-compare-key-0123456789';
const context: ProviderContext = { apiKey: KEY, timeoutMs: 5000, upstream: { allowPrivate: true, maxImageBytes: 8 * 1024 * 1024 } };

function request(overrides: Partial<RenderRequest> = {}): RenderRequest {
  return {
    prompt: 'A red fox in snow',
    seed: 7,
    ...pixelSize('16:9', '2K'),
    resolution: '2K',
    aspectRatio: '16:9',
    quality: null,
    background: null,
    references: [],
    ...overrides,
  };
}

async function formFields(req: CapturedRequest): Promise<Record<string, unknown>> {
  const form = await new Response(new Uint8Array(req.body), {
    headers: { 'content-type': String(req.headers['content-type']) },
  }).formData();
  const fields: Record<string, unknown> = {};
  for (const [name, value] of form.entries()) {
    const v = typeof value === 'string' ? value : { type: value.type, bytes: Buffer.from(await value.arrayBuffer()).toString('base64') };
    fields[name] = name in fields ? [...([] as unknown[]).concat(fields[name]), v] : v;
  }
  return fields;
}

/**
 * @google/genai's fetch needs undici's global dispatcher, which jest's sandbox does not
 * expose ("Undici globalDispatcher is not available"): its calls run in a plain node child.
 */
async function runInNode(script: string): Promise<void> {
  await promisify(execFile)(process.execPath, ['-e', script], { cwd: path.resolve(__dirname, '../../../..'), timeout: 30_000 });
}

let reference: Buffer;
beforeAll(async () => {
  reference = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ff6600' } })
    .png()
    .toBuffer();
});

describe('openai: Kiln sends what the official openai SDK sends', () => {
  const fake = new OpenAiFakeUpstream();
  beforeAll(() => fake.start());
  afterAll(() => fake.stop());

  const sdk = () => new OpenAI({ apiKey: KEY, baseURL: fake.baseUrl, maxRetries: 0, timeout: 5000 });
  const route = () => ({ type: 'openai' as const, baseUrl: fake.baseUrl, model: 'gpt-image-1' });

  it('generations (JSON)', async () => {
    await sdk().images.generate({
      model: 'gpt-image-1',
      prompt: 'A red fox in snow',
      n: 1,
      size: '1536x1024',
      quality: 'high',
      background: 'transparent',
    });
    await openaiType.create(route(), context).render(request({ quality: 'high', background: 'transparent' }));
    const [fromSdk, fromKiln] = fake.requests.splice(0);
    expect(fromKiln.method).toBe(fromSdk.method);
    expect(fromKiln.path).toBe(fromSdk.path);
    expect(fromKiln.headers.authorization).toBe(fromSdk.headers.authorization);
    expect(String(fromKiln.headers['content-type'])).toMatch(/^application\/json/);
    expect(JSON.parse(fromKiln.body.toString())).toEqual(JSON.parse(fromSdk.body.toString()));
  });

  it('edits with a reference (multipart)', async () => {
    const image = await toFile(reference, 'ref-0.png', { type: 'image/png' });
    await sdk().images.edit({ model: 'gpt-image-1', prompt: 'A red fox in snow', image: [image], n: 1, size: '1536x1024' });
    await openaiType.create(route(), context).render(request({ references: [{ data: reference, contentType: 'image/png' }] }));
    const [fromSdk, fromKiln] = fake.requests.splice(0);
    expect(fromKiln.method).toBe(fromSdk.method);
    expect(fromKiln.path).toBe(fromSdk.path);
    expect(fromKiln.headers.authorization).toBe(fromSdk.headers.authorization);
    expect(String(fromKiln.headers['content-type'])).toMatch(/^multipart\/form-data; boundary=/);
    expect(await formFields(fromKiln)).toEqual(await formFields(fromSdk));
  });
});

describe('gemini: Kiln sends what the official @google/genai SDK sends', () => {
  const fake = new GeminiFakeUpstream();
  beforeAll(() => fake.start());
  afterAll(() => fake.stop());

  it('generateContent with a reference, ratio and imageSize', async () => {
    await runInNode(`
      const { GoogleGenAI } = require('@google/genai');
      const ai = new GoogleGenAI({ apiKey: ${JSON.stringify(KEY)}, httpOptions: { baseUrl: ${JSON.stringify(fake.originUrl)}, apiVersion: 'v1beta' } });
      ai.models.generateContent({
        model: 'gemini-3.1-flash-image',
        contents: [{ role: 'user', parts: [{ text: 'A red fox in snow' }, { inlineData: { mimeType: 'image/png', data: ${JSON.stringify(reference.toString('base64'))} } }] }],
        config: { responseModalities: ['IMAGE'], seed: 7, imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
      }).then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
    `);
    const route = { type: 'gemini' as const, baseUrl: fake.baseUrl, model: 'gemini-3.1-flash-image' };
    await geminiType.create(route, context).render(request({ references: [{ data: reference, contentType: 'image/png' }] }));
    const [fromSdk, fromKiln] = fake.requests.splice(0);
    expect(fromKiln.method).toBe(fromSdk.method);
    expect(fromKiln.path).toBe(fromSdk.path);
    expect(fromKiln.headers['x-goog-api-key']).toBe(fromSdk.headers['x-goog-api-key']);
    expect(JSON.parse(fromKiln.body.toString())).toEqual(JSON.parse(fromSdk.body.toString()));
  });
});
