import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { batchCount, download, routeModel, TestAccount, waitFor } from '@app/testing';
import { LiveKiln, startLiveKiln } from './helpers/live-kiln';

jest.setTimeout(180_000);

const BIN = path.resolve(__dirname, '../bin/kiln.js');
const MODEL = 'beta-2-lite'; // 3 credits an image at 1K
const SLOW = 'delta'; // routed to take 4 s an image: a batch still running when cancelled

/** `kiln mcp` as an agent starts it (the built bin, over stdio), with an MCP client of the same package. */
async function connect(kiln: LiveKiln, account: TestAccount | null): Promise<{ client: Client; stderr: () => string; errors: Error[] }> {
  if (!fs.existsSync(path.resolve(__dirname, '../dist/apps/cli/src/main.js'))) throw new Error('run "npm run build" first (npm test does)');
  const env: Record<string, string> = { PATH: process.env.PATH ?? '', KILN_URL: kiln.url };
  if (account) env.KILN_API_KEY = account.key;
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp'], env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'kiln-mcp-test', version: '1.0.0' });
  // A line on stdout that is not JSON-RPC (a stray log) would be reported here.
  const errors: Error[] = [];
  client.onerror = (err) => errors.push(err);
  await client.connect(transport);
  return { client, stderr: () => stderr, errors };
}

/** A tool's answer: the JSON in its text, and whether it is a tool error. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ isError: boolean; value: any }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  let value: unknown = text;
  try {
    value = JSON.parse(text);
  } catch {
    // the SDK's own refusals (input validation) are plain text
  }
  return { isError: !!result.isError, value };
}

describe('kiln mcp (Model Context Protocol over stdio)', () => {
  let kiln: LiveKiln;
  const restores: (() => Promise<void>)[] = [];
  const clients: Client[] = [];

  beforeAll(async () => {
    kiln = await startLiveKiln('cli-mcp');
    restores.push(await routeModel(kiln.api, MODEL, { type: 'simulated', latencyMs: { min: 100, max: 250 } }));
    restores.push(await routeModel(kiln.api, SLOW, { type: 'simulated', latencyMs: 4000 }));
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    for (const r of restores) await r();
    await kiln?.close();
  });
  const open = async (account: TestAccount | null) => {
    const session = await connect(kiln, account);
    clients.push(session.client);
    return session;
  };

  const balance = async (accountId: string): Promise<number> => {
    const [row] = await kiln.api.db.query(`SELECT balance::int AS n FROM accounts WHERE id = $1`, [accountId]);
    return row.n;
  };

  it('lists its five tools with input schemas mirroring the batch request; stdout carries the protocol only', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 100 });
    const { client, stderr, errors } = await open(a);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['batch_status', 'cancel_batch', 'estimate', 'generate_images', 'list_models']);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    const generate = byName.generate_images.inputSchema;
    expect(generate.required).toEqual(['prompts', 'model']);
    expect(Object.keys(generate.properties ?? {}).sort()).toEqual(
      [
        'aspectRatio',
        'background',
        'countPerCombo',
        'deadline',
        'idempotencyKey',
        'model',
        'note',
        'outputFormat',
        'prompts',
        'quality',
        'refImages',
        'refMode',
        'resolution',
        'seed',
        'tier',
        'timeoutSeconds',
      ].sort(),
    );
    expect((generate.properties as any).resolution.enum).toEqual(['1K', '2K', '4K']);
    expect((generate.properties as any).timeoutSeconds).toMatchObject({ type: 'integer', minimum: 1, maximum: 600 });
    expect(Object.keys(byName.estimate.inputSchema.properties ?? {})).not.toContain('timeoutSeconds');
    expect(byName.batch_status.inputSchema.required).toEqual(['batchId']);
    expect(byName.cancel_batch.inputSchema.required).toEqual(['batchId']);

    const models = await call(client, 'list_models');
    expect(models.isError).toBe(false);
    expect(models.value.find((m: any) => m.key === MODEL)).toMatchObject({ creditCost: { '1K': 3 } });
    // The one line it logs goes to stderr (stdout is the client's JSON-RPC, which parsed above).
    expect(stderr()).toContain(`kiln mcp: serving Kiln at ${kiln.url}`);
    expect(errors).toEqual([]);
  });

  it('estimate, then generate_images end to end: the URLs download; the same call again returns the same batch, charged once', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 100 });
    const { client } = await open(a);
    const args = { prompts: ['a fox in the snow', 'a lighthouse at dusk'], model: MODEL, countPerCombo: 2 };
    const estimate = await call(client, 'estimate', args);
    expect(estimate).toMatchObject({ isError: false, value: { total: 4, creditsRequired: 12, balance: 100, wouldCreate: true } });
    expect(await batchCount(kiln.api, a.id)).toBe(0);

    const made = await call(client, 'generate_images', { ...args, timeoutSeconds: 60 });
    expect(made.isError).toBe(false);
    expect(made.value).toMatchObject({ status: 'succeeded', done: true, total: 4, succeeded: 4, creditsCharged: 12, failures: [] });
    expect(made.value.urls).toHaveLength(4);
    for (const url of made.value.urls) {
      const file = await download(kiln.api, url);
      expect({ status: file.status, type: file.type }).toEqual({ status: 200, type: 'image/png' });
    }
    expect(await balance(a.id)).toBe(88);

    // An agent retrying the call (its answer lost, or its client timed out) pays nothing more.
    const again = await call(client, 'generate_images', { ...args, timeoutSeconds: 60 });
    expect(again.value).toMatchObject({ batchId: made.value.batchId, done: true, succeeded: 4 });
    expect(await batchCount(kiln.api, a.id)).toBe(1);
    expect(await balance(a.id)).toBe(88);
    // A new idempotencyKey asks for the same thing again, as a new batch.
    const fresh = await call(client, 'generate_images', { ...args, idempotencyKey: 'second-render', timeoutSeconds: 60 });
    expect(fresh.value.batchId).not.toBe(made.value.batchId);
    expect(await batchCount(kiln.api, a.id)).toBe(2);
    expect(await balance(a.id)).toBe(76);

    const status = await call(client, 'batch_status', { batchId: made.value.batchId });
    expect(status.value).toMatchObject({ batchId: made.value.batchId, status: 'succeeded', urls: made.value.urls });
  });

  it("bad input is a tool error with Kiln's code and request id, and charges nothing", async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 100 });
    const { client } = await open(a);
    const unknown = await call(client, 'generate_images', { prompts: ['a fox'], model: 'no-such-model' });
    expect(unknown.isError).toBe(true);
    expect(unknown.value.error).toMatchObject({ code: 'unknown_model', status: expect.any(Number) });
    expect(unknown.value.error.requestId).toEqual(expect.any(String));
    const ratio = await call(client, 'estimate', { prompts: ['a fox'], model: MODEL, aspectRatio: '7:3' });
    expect(ratio).toMatchObject({ isError: true, value: { error: { code: 'size_not_allowed', status: 400 } } });
    const notABatch = await call(client, 'batch_status', { batchId: '00000000-0000-4000-8000-000000000000' });
    expect(notABatch).toMatchObject({ isError: true, value: { error: { code: 'not_found', status: 404 } } });
    // Arguments of the wrong type never reach Kiln: the SDK's schema refuses them.
    const wrongType = await call(client, 'generate_images', { prompts: 'a fox', model: MODEL });
    expect(wrongType.isError).toBe(true);
    expect(await batchCount(kiln.api, a.id)).toBe(0);
    expect(await balance(a.id)).toBe(100);
  });

  it('requests written all at once with stdin closed after them (`... | kiln mcp`) are answered before it exits', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 100 });
    const child = spawn(process.execPath, [BIN, 'mcp'], {
      env: { PATH: process.env.PATH ?? '', KILN_URL: kiln.url, KILN_API_KEY: a.key },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (d) => (stdout += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const lines = [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'sh', version: '1' } },
      },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      {
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'generate_images', arguments: { model: MODEL, prompts: ['a red fox'] } },
      },
    ];
    child.stdin.end(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    expect(await exited).toBe(0);
    // Every line of stdout is a JSON-RPC message: the two answers, in order.
    const messages = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(messages.map((m) => m.id)).toEqual([1, 2]);
    const result = JSON.parse(messages[1].result.content[0].text);
    expect(result).toMatchObject({ done: true, succeeded: 1, creditsCharged: 3 });
    expect(result.urls).toHaveLength(1);
  });

  it('without KILN_API_KEY the tools are listed and each call is a missing_api_key tool error', async () => {
    const { client } = await open(null);
    expect((await client.listTools()).tools).toHaveLength(5);
    const models = await call(client, 'list_models');
    expect(models).toMatchObject({ isError: true, value: { error: { code: 'missing_api_key' } } });
    expect(models.value.error.message).toContain('KILN_API_KEY');
    const made = await call(client, 'generate_images', { prompts: ['a fox'], model: MODEL });
    expect(made).toMatchObject({ isError: true, value: { error: { code: 'missing_api_key' } } });
  });

  it('a batch not done within timeoutSeconds comes back with its id; cancel_batch refunds what had not started', async () => {
    const a = await kiln.api.account({ plan: 'starter', credits: 200 });
    const { client } = await open(a);
    const made = await call(client, 'generate_images', {
      prompts: Array.from({ length: 10 }, (_, i) => `slow prompt ${i}`),
      model: SLOW,
      timeoutSeconds: 1,
    });
    expect(made.isError).toBe(false);
    expect(made.value).toMatchObject({ done: false, total: 10 });
    expect(made.value.next).toContain('batch_status');
    const charged = made.value.creditsCharged;
    expect(charged).toBeGreaterThan(0);

    const cancelled = await call(client, 'cancel_batch', { batchId: made.value.batchId });
    expect(cancelled).toMatchObject({ isError: false, value: { batchId: made.value.batchId } });
    const final = await waitFor('the cancelled batch to be done', async () => {
      const s = await call(client, 'batch_status', { batchId: made.value.batchId, waitSeconds: 10 });
      return s.value.done ? s.value : null;
    });
    expect(final.cancelled).toBeGreaterThan(0);
    expect(final.succeeded + final.failed + final.cancelled).toBe(10);
    expect(final.creditsRefunded).toBe((charged / 10) * final.cancelled);
    expect(await balance(a.id)).toBe(200 - charged + final.creditsRefunded);
  });
});
