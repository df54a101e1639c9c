import { createHash, randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { BatchDetail, Kiln, KilnApiError, SDK_VERSION } from '@app/sdk';
import {
  batchIdSchema,
  batchRequestOf,
  batchRequestSchema,
  batchStatusSchema,
  generateImagesSchema,
  WAIT_DEFAULT_SECONDS,
} from './mcp.schemas';
import { waitForBatch } from '../follow';

/*
 * `kiln mcp`: Kiln's tools for agents, as a Model Context Protocol server on stdin/stdout
 * (docs/mcp.md). Every call goes through the SDK with the caller's KILN_API_KEY and KILN_URL,
 * read when the call is made, so a server started without a key still lists its tools and
 * answers each call with a `missing_api_key` tool error. stdout carries the protocol only.
 */

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** A tool's answer: its value as JSON text (agents read text; the JSON keeps every field). */
const answer = (value: unknown): CallToolResult => ({ content: [{ type: 'text', text: JSON.stringify(value, null, 2) }] });

/** A refusal as an MCP tool error, carrying Kiln's error code, message, status and request id. */
export function toolError(err: unknown): CallToolResult {
  const error =
    err instanceof KilnApiError
      ? { code: err.code, message: err.message, status: err.status, requestId: err.requestId ?? null, details: err.details ?? null }
      : { code: 'internal_error', message: (err as Error)?.message ?? String(err), status: null, requestId: null, details: null };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error }, null, 2) }] };
}

/** The client for one call; no key is the agent's to fix (its MCP config), so it is a tool error too. */
function client(): Kiln {
  if (!process.env.KILN_API_KEY)
    throw new KilnApiError(
      'missing_api_key',
      'KILN_API_KEY is not set: add it to the env of the kiln mcp server in the MCP config',
      401,
      undefined,
      undefined,
    );
  return new Kiln();
}

/** Tool calls still running: on stdin's end the server answers them before it exits. */
const inFlight = new Set<Promise<unknown>>();

/** Runs a tool's body; whatever it throws becomes a tool error rather than a protocol error. */
const tool =
  <A>(body: (args: A, extra: Extra) => Promise<unknown>) =>
  async (args: A, extra: Extra): Promise<CallToolResult> => {
    const run = body(args, extra).then(answer, (err) => {
      if (!(err instanceof KilnApiError)) process.stderr.write(`kiln mcp: ${(err as Error)?.stack ?? String(err)}\n`);
      return toolError(err);
    });
    inFlight.add(run);
    try {
      return await run;
    } finally {
      // The answer is sent after this resolves: let it reach stdout before the count drops.
      setImmediate(() => inFlight.delete(run));
    }
  };

/** What an agent needs of a batch: where it stands, the image URLs, and why images failed. */
export function batchSummary(detail: BatchDetail) {
  const { batch, tasks } = detail;
  const counts = batch.counts as typeof batch.counts & { cancelled?: number };
  return {
    batchId: batch.id,
    status: batch.status,
    done: batch.done,
    model: batch.model,
    tier: batch.tier,
    total: batch.total,
    succeeded: counts.succeeded,
    failed: counts.failed,
    cancelled: counts.cancelled ?? 0,
    toGo: counts.pending + counts.running,
    creditsCharged: batch.creditsCharged,
    creditsRefunded: batch.creditsRefunded,
    urls: tasks.flatMap((t) => (t.status === 'succeeded' ? t.resultUrls : [])),
    failures: tasks
      .filter((t) => t.status === 'failed')
      .map((t) => ({ index: t.index, prompt: t.prompt, code: t.errorCode, error: t.error })),
  };
}

/**
 * The Idempotency-Key of a generate_images call: the agent's own when it gives one, else a hash
 * of this server's session and the request. An agent that retries a call (its client timed out,
 * the answer was lost) sends the same arguments again and gets the same batch back, charged once;
 * a call with other arguments is another batch. The session salt keeps a later conversation
 * (another `kiln mcp` process) asking for the same thing from receiving the earlier batch.
 */
export function idempotencyKeyOf(session: string, request: object, given: string | undefined): string {
  const hash = createHash('sha256');
  hash.update(given === undefined ? `session:${session}\n` : `key:${given}\n`);
  hash.update(JSON.stringify(request));
  return `mcp-${hash.digest('hex').slice(0, 40)}`;
}

/**
 * Waits up to `seconds` for the batch; the batch as it is then, done or not. It follows the
 * batch's progress stream (each image the moment it exists, one connection), and long polls
 * when the stream is refused or fails (a Kiln from before the stream), as `kiln --wait` does.
 */
export async function waitUpTo(
  kiln: Kiln,
  id: string,
  seconds: number,
  extra: Pick<Extra, 'signal' | '_meta' | 'sendNotification'>,
): Promise<BatchDetail> {
  if (seconds <= 0) return kiln.batches.get(id, { signal: extra.signal });
  const progressToken = extra._meta?.progressToken;
  const timeout = AbortSignal.timeout(seconds * 1000);
  try {
    return await waitForBatch(kiln, id, {
      timeoutMs: seconds * 1000,
      signal: AbortSignal.any([extra.signal, timeout]),
      // Progress notifications when the client asked for them (a progressToken): they also let
      // clients that reset their timeout on progress wait for long batches.
      onProgress: (d) => {
        if (progressToken === undefined) return;
        const c = d.batch.counts as typeof d.batch.counts & { cancelled?: number };
        const finished = c.succeeded + c.failed + (c.cancelled ?? 0);
        void extra
          .sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress: finished, total: d.batch.total, message: `${finished}/${d.batch.total} images finished` },
          })
          .catch(() => undefined);
      },
    });
  } catch (err) {
    const timedOut = (err instanceof KilnApiError && err.code === 'wait_timeout') || (timeout.aborted && !extra.signal.aborted);
    if (timedOut) return kiln.batches.get(id, { signal: extra.signal });
    throw err;
  }
}

export function createKilnMcpServer(): McpServer {
  const server = new McpServer({ name: 'kiln', version: SDK_VERSION });
  const session = randomUUID();

  server.registerTool(
    'list_models',
    {
      title: 'List image models',
      description:
        'The image models: credits per image by resolution (standard tier, and economy with its window), aspect ratios, features',
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    // No input schema: the callback's first argument is the request context.
    (extra) => tool<undefined>(async () => (await client().models()).models)(undefined, extra),
  );

  server.registerTool(
    'estimate',
    {
      title: 'Price a batch',
      description:
        'What generate_images with these arguments would cost, the balance, and whether it would go through now. Charges nothing.',
      inputSchema: batchRequestSchema,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    tool(async (args) => client().batches.estimate(batchRequestOf(args))),
  );

  server.registerTool(
    'generate_images',
    {
      title: 'Generate images',
      description:
        'Creates a batch (charged when created; failed images are refunded) and waits for it, then returns the image URLs. ' +
        `Waits timeoutSeconds (default ${WAIT_DEFAULT_SECONDS}); a batch not done by then comes back with done: false and its batchId: ` +
        'follow it with batch_status. Retrying a call with the same arguments returns the same batch, not charged again.',
      inputSchema: generateImagesSchema,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    tool(async (args, extra) => {
      const kiln = client();
      const request = batchRequestOf(args);
      const idempotencyKey = idempotencyKeyOf(session, request, args.idempotencyKey);
      const created = await kiln.batches.create(request, { idempotencyKey, signal: extra.signal });
      const detail = await waitUpTo(kiln, created.id, args.timeoutSeconds ?? WAIT_DEFAULT_SECONDS, extra);
      const summary = batchSummary(detail);
      return summary.done ? summary : { ...summary, next: `Not done yet: call batch_status with batchId ${created.id}` };
    }),
  );

  server.registerTool(
    'batch_status',
    {
      title: 'Batch status',
      description: "A batch's status, counts, credits and the URLs of its finished images; waitSeconds waits for it to finish first",
      inputSchema: batchStatusSchema,
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    tool(async (args, extra) => batchSummary(await waitUpTo(client(), args.batchId, args.waitSeconds ?? 0, extra))),
  );

  server.registerTool(
    'cancel_batch',
    {
      title: 'Cancel a batch',
      description: 'Cancels the images of a batch that have not started (refunded); images already rendering finish',
      inputSchema: batchIdSchema,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
    },
    tool(async (args) => {
      const batch = await client().batches.cancel(args.batchId);
      return { batchId: batch.id, status: batch.status, done: batch.done, creditsRefunded: batch.creditsRefunded };
    }),
  );
  return server;
}

/**
 * Serves the tools on stdin/stdout until the client closes stdin, then answers the calls still
 * running (a client may write its requests and close stdin at once: `... | kiln mcp`).
 */
export async function runMcpServer(): Promise<void> {
  const server = createKilnMcpServer();
  const transport = new StdioServerTransport();
  const ended = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  await server.connect(transport);
  process.stderr.write(`kiln mcp: serving Kiln at ${process.env.KILN_URL ?? 'http://localhost:8080'} over stdio\n`);
  await ended;
  // A request read in the last chunk starts its call on a later tick: give it one before counting.
  await new Promise((resolve) => setImmediate(resolve));
  while (inFlight.size > 0) {
    await Promise.allSettled([...inFlight]);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await server.close();
}
