import OpenAI, { toFile } from 'openai';
import { pixelSize } from './image-size';
import { OpenAiBatchFakeUpstream } from './openai/openai-batch.fake';
import { OpenAiBatchApi } from './openai/openai.batch';
import type { CapturedRequest } from './provider-type';
import type { UpstreamBatchLine, UpstreamBatchStatus } from './upstream-batch';

/**
 * The batch clients' request shapes against the official SDKs (devDependencies only), as
 * sdk-request-shapes.spec.ts does for renders: the SDK and Kiln make the same calls to the
 * same capture server on 127.0.0.1, and method, path, auth and body must agree.
 */

const KEY = 'sdk-compare-key-0123456789';

function line(key: string): UpstreamBatchLine {
  return { key, request: { prompt: `A red fox ${key}`, seed: 7, ...pixelSize('1:1', '1K'), resolution: '1K', aspectRatio: '1:1', quality: 'medium', background: null, references: [] } };
}

async function formFields(req: CapturedRequest): Promise<Record<string, unknown>> {
  const form = await new Response(new Uint8Array(req.body), { headers: { 'content-type': String(req.headers['content-type']) } }).formData();
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
  const kiln = () => new OpenAiBatchApi({ baseUrl: fake.baseUrl, apiKey: KEY, model: 'gpt-image-1', timeoutMs: 5000, allowPrivate: true, maxImageBytes: 8 * 1024 * 1024, pollIntervalMs: 1000 });

  it('files.create purpose=batch, batches.create, retrieve, list, cancel and files.content', async () => {
    const client = kiln();
    const encoded = [client.encodeLine(line('t1')), client.encodeLine(line('t2'))];
    const jsonl = encoded.join('\n') + '\n';

    // Upload: multipart with purpose and the JSONL file.
    const sdkFile = await sdk().files.create({ file: await toFile(Buffer.from(jsonl), 'kiln-g1.jsonl', { type: 'application/jsonl' }), purpose: 'batch' });
    const { inputId } = await client.uploadInput(encoded, 'g1');
    let [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);
    expect(String(fromKiln.headers['content-type'])).toMatch(/^multipart\/form-data; boundary=/);
    expect(await formFields(fromKiln)).toEqual(await formFields(fromSdk));

    // Create, tagged with the group in metadata.
    const sdkBatch = await sdk().batches.create({ input_file_id: sdkFile.id, endpoint: '/v1/images/generations', completion_window: '24h', metadata: { kiln_group: 'g1' } });
    const ref = await client.createBatch(inputId, 'g1');
    [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);
    expect(String(fromKiln.headers['content-type'])).toMatch(/^application\/json/);
    expect({ ...JSON.parse(fromKiln.body.toString()), input_file_id: 'x' }).toEqual({ ...JSON.parse(fromSdk.body.toString()), input_file_id: 'x' });

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
    const output = ended.found.outputFileId!;
    await (await sdk().files.content(output)).text();
    for await (const _ of client.results(ref, { ...ended, found: { outputFileId: output } })) void _;
    [fromSdk, fromKiln] = fake.requests.splice(0);
    sameCall(fromKiln, fromSdk);
  });
});
