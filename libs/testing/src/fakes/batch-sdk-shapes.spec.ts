import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import OpenAI, { toFile } from 'openai';
import { GeminiBatchApi, OpenAiBatchApi, pixelSize, UpstreamBatchLine, UpstreamBatchStatus } from '@app/providers';
import type { CapturedRequest } from './fake-upstream';
import { GeminiBatchFakeUpstream } from './gemini/gemini-batch.fake';
import { OpenAiBatchFakeUpstream } from './openai/openai-batch.fake';

/**
 * The batch clients' request shapes against the official SDKs (devDependencies only), as
 * sdk-request-shapes.spec.ts does for renders: the SDK and Kiln make the same calls to the
 * same capture server on 127.0.0.1, and method, path, auth and body must agree.
 */

const KEY = 'sdk-compare-key-0123456789';

function line(key: string): UpstreamBatchLine {
  return {
    key,
    request: {
      prompt: `A red fox ${key}`,
      seed: 7,
      ...pixelSize('1:1', '1K'),
      resolution: '1K',
      aspectRatio: '1:1',
      quality: 'medium',
      background: null,
      references: [],
    },
  };
}

async function formFields(req: CapturedRequest): Promise<Record<string, unknown>> {
  const form = await new Response(new Uint8Array(req.body), {
    headers: { 'content-type': String(req.headers['content-type']) },
  }).formData();
  const fields: Record<string, unknown> = {};
  for (const [name, value] of form.entries()) {
    fields[name] = typeof value === 'string' ? value : { name: value.name, type: value.type, text: await value.text() };
  }
  return fields;
}

function sameCall(fromKiln: CapturedRequest, fromSdk: CapturedRequest): void {
  expect(fromKiln.method).toBe(fromSdk.method);
  expect(fromKiln.path).toBe(fromSdk.path);
  expect(fromKiln.headers.authorization).toBe(fromSdk.headers.authorization);
}

describe('openai batch: Kiln sends what the official openai SDK sends', () => {
  const fake = new OpenAiBatchFakeUpstream({ completeAfterMs: null });
  beforeAll(() => fake.start());
  afterAll(() => fake.stop());

  const sdk = () => new OpenAI({ apiKey: KEY, baseURL: fake.baseUrl, maxRetries: 0, timeout: 5000 });
  const kiln = () =>
    new OpenAiBatchApi({
      baseUrl: fake.baseUrl,
      apiKey: KEY,
      model: 'gpt-image-1',
      timeoutMs: 5000,
      allowPrivate: true,
      maxImageBytes: 8 * 1024 * 1024,
      pollIntervalMs: 1000,
    });

  it('files.create purpose=batch, batches.create, retrieve, list, cancel and files.content', async () => {
    const client = kiln();
    const encoded = [client.encodeLine(line('t1')), client.encodeLine(line('t2'))];
    const jsonl = encoded.join('\n') + '\n';

    // Upload: multipart with purpose and the JSONL file.
    const sdkFile = await sdk().files.create({
      file: await toFile(Buffer.from(jsonl), 'kiln-g1.jsonl', { type: 'application/jsonl' }),
      purpose: 'batch',
    });
    const { inputId } = await client.uploadInput(encoded, 'g1');
    let [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);
    expect(String(fromKiln.headers['content-type'])).toMatch(/^multipart\/form-data; boundary=/);
    expect(await formFields(fromKiln)).toEqual(await formFields(fromSdk));

    // Create, tagged with the group in metadata.
    const sdkBatch = await sdk().batches.create({
      input_file_id: sdkFile.id,
      endpoint: '/v1/images/generations',
      completion_window: '24h',
      metadata: { kiln_group: 'g1' },
    });
    const ref = await client.createBatch(inputId, 'g1');
    [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);
    expect(String(fromKiln.headers['content-type'])).toMatch(/^application\/json/);
    expect({ ...JSON.parse(fromKiln.body.toString()), input_file_id: 'x' }).toEqual({
      ...JSON.parse(fromSdk.body.toString()),
      input_file_id: 'x',
    });

    // Retrieve (Kiln's poll) of the same batch.
    await sdk().batches.retrieve(sdkBatch.id);
    await client.poll({ batchId: sdkBatch.id, state: {} });
    [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);

    // List with a page size and a cursor (Kiln's findBatch reads pages of 100, newest first).
    for (let i = 0; i < 100; i++) await client.createBatch(inputId, `other-${i}`);
    fake.requests.length = 0;
    const firstPage = await sdk().batches.list({ limit: 100 });
    await sdk().batches.list({ limit: 100, after: firstPage.data.at(-1)!.id });
    expect(await client.findBatch('g-none')).toBeNull();
    const calls = fake.requests.splice(0);
    expect(calls).toHaveLength(4);
    sameCall(calls[2], calls[0]);
    sameCall(calls[3], calls[1]);

    // Cancel.
    await sdk().batches.cancel(sdkBatch.id);
    await client.cancel(ref);
    [fromSdk, fromKiln] = fake.requests.splice(0);
    expect(fromKiln.method).toBe(fromSdk.method);
    expect(fromKiln.path.replace(ref.batchId, 'ID')).toBe(fromSdk.path.replace(sdkBatch.id, 'ID'));
    expect(fromKiln.headers.authorization).toBe(fromSdk.headers.authorization);

    // files.content of the output file (Kiln streams it).
    expect(await client.poll(ref)).toMatchObject({ state: 'waiting', upstreamStatus: 'cancelling' });
    const ended = (await client.poll(ref)) as Extract<UpstreamBatchStatus, { state: 'ended' }>;
    fake.requests.length = 0;
    const output = ended.found.outputFileId;
    await (await sdk().files.content(output)).text();
    for await (const _ of client.results(ref, { ...ended, found: { outputFileId: output } })) void _;
    [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);
  });
});

/**
 * @google/genai's fetch needs undici's global dispatcher, which jest's sandbox does not
 * expose: its calls run in a plain node child (as in sdk-request-shapes.spec.ts).
 */
async function runInNode(script: string): Promise<void> {
  await promisify(execFile)(process.execPath, ['-e', script], { cwd: path.resolve(__dirname, '../../../..'), timeout: 60_000 });
}

describe('gemini batch: Kiln sends what the official @google/genai SDK sends', () => {
  const fake = new GeminiBatchFakeUpstream({ completeAfterMs: null });
  beforeAll(() => fake.start());
  afterAll(() => fake.stop());

  it('files.upload (resumable), batches.create over the file, get, list, cancel and files.download', async () => {
    const client = new GeminiBatchApi({
      baseUrl: fake.baseUrl,
      apiKey: KEY,
      model: 'gemini-3.1-flash-image',
      timeoutMs: 5000,
      allowPrivate: true,
      maxImageBytes: 8 * 1024 * 1024,
      pollIntervalMs: 1000,
    });
    const encoded = [client.encodeLine(line('t1')), client.encodeLine(line('t2'))];
    const jsonl = encoded.join('\n') + '\n';
    await runInNode(`
      const { GoogleGenAI } = require('@google/genai');
      const os = require('node:os'), path = require('node:path'), fs = require('node:fs');
      const ai = new GoogleGenAI({ apiKey: ${JSON.stringify(KEY)}, httpOptions: { baseUrl: ${JSON.stringify(fake.originUrl)}, apiVersion: 'v1beta' } });
      (async () => {
        const file = await ai.files.upload({ file: new Blob([${JSON.stringify(jsonl)}], { type: 'application/jsonl' }), config: { mimeType: 'application/jsonl', displayName: 'kiln-g1' } });
        const batch = await ai.batches.create({ model: 'gemini-3.1-flash-image', src: file.name, config: { displayName: 'g1' } });
        await ai.batches.get({ name: batch.name });
        await ai.batches.list({ config: { pageSize: 100 } });
        await ai.batches.cancel({ name: batch.name });
        const ended = await ai.batches.get({ name: batch.name });
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'genai-'));
        await ai.files.download({ file: ended.dest.fileName, downloadPath: path.join(dir, 'out.jsonl') });
        fs.rmSync(dir, { recursive: true, force: true });
      })().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
    `);
    const fromSdk = fake.requests.splice(0);

    const { inputId } = await client.uploadInput(encoded, 'g1');
    const ref = await client.createBatch(inputId, 'g1');
    await client.poll(ref);
    await client.findBatch('g-none');
    await client.cancel(ref);
    const ended = (await client.poll(ref)) as Extract<UpstreamBatchStatus, { state: 'ended' }>;
    for await (const _ of client.results(ref, ended)) void _;
    const fromKiln = fake.requests.splice(0);

    const names = ['upload start', 'upload bytes', 'create', 'get', 'list', 'cancel', 'get', 'download'];
    expect(fromKiln).toHaveLength(names.length);
    expect(fromSdk).toHaveLength(names.length);
    const normal = (p: string) =>
      p
        .replace(/upload_id=[0-9a-f]+/, 'upload_id=U')
        .replace(/batches\/[0-9a-f]+/, 'batches/B')
        .replace(/files\/batch-[0-9a-f]+/, 'files/F')
        .replace(/files\/[0-9a-f]+/, 'files/F');
    names.forEach((name, i) => {
      const [k, s] = [fromKiln[i], fromSdk[i]];
      expect([name, k.method, normal(k.path)]).toEqual([name, s.method, normal(s.path)]);
      expect(k.headers['x-goog-api-key']).toBe(s.headers['x-goog-api-key']);
      expect(k.headers.host).toBe(s.headers.host);
    });
    const upload = (r: CapturedRequest) =>
      Object.fromEntries(Object.entries(r.headers).filter(([h]) => h.startsWith('x-goog-upload-') && h !== 'x-goog-upload-file-name'));
    expect(upload(fromKiln[0])).toEqual(upload(fromSdk[0]));
    expect(String(fromKiln[0].headers['content-type'])).toMatch(/^application\/json/);
    expect(JSON.parse(fromKiln[0].body.toString())).toEqual({ file: { ...JSON.parse(fromSdk[0].body.toString()).file } });
    expect(upload(fromKiln[1])).toEqual(upload(fromSdk[1]));
    expect(fromKiln[1].body.equals(fromSdk[1].body)).toBe(true);
    const body = (r: CapturedRequest) => JSON.parse(r.body.toString()) as { batch: { inputConfig: { fileName: string } } };
    const [kb, sb] = [body(fromKiln[2]), body(fromSdk[2])];
    expect({ ...kb, batch: { ...kb.batch, inputConfig: { fileName: 'F' } } }).toEqual({
      ...sb,
      batch: { ...sb.batch, inputConfig: { fileName: 'F' } },
    });
    expect(String(fromKiln[2].headers['content-type'])).toMatch(/^application\/json/);
  });
});
