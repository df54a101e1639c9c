import { z } from 'zod';
import type { CreateBatchRequest } from '@app/sdk';

/*
 * The input schemas of `kiln mcp`'s tools. A batch request mirrors the SDK's CreateBatchRequest
 * (the API's CreateBatchRequestDto) field for field; the checks at the end of this file make a
 * drift between the two fail the typecheck. The schemas check types only: the values (a legal
 * ratio for the model, a prompt that is not blank...) are the server's to judge, so an agent
 * meets Kiln's own error codes, the same as every other client.
 */

export const batchRequestShape = {
  prompts: z.array(z.string()).min(1).describe('The prompts; the batch renders each (countPerCombo images per prompt)'),
  model: z.string().describe('A model key, from list_models'),
  aspectRatio: z.string().optional().describe('e.g. "16:9"; default "1:1". Legal ratios per resolution are in list_models'),
  resolution: z.enum(['1K', '2K', '4K']).optional().describe('Default 1K'),
  countPerCombo: z.number().int().optional().describe('Images per prompt (per reference image with refMode "each"); default 1'),
  refMode: z.enum(['none', 'each', 'combined']).optional().describe('How refImages pair with prompts; default none'),
  refImages: z.array(z.string()).optional().describe('Reference image URLs uploaded to this account (needed unless refMode is none)'),
  quality: z.enum(['auto', 'low', 'medium', 'high']).optional().describe('Honoured by models whose supportsQuality is true'),
  background: z.string().nullable().optional().describe('"transparent" or "#RRGGBB"; models whose supportsBackground is true'),
  note: z.string().nullable().optional().describe('A label shown in the dashboard'),
  seed: z
    .number()
    .int()
    .nullable()
    .optional()
    .describe('Image n renders with seed + n - 1: the same seed and request make the same images'),
  outputFormat: z.enum(['png', 'jpeg', 'webp']).optional().describe('Default png'),
  tier: z
    .enum(['standard', 'economy'])
    .optional()
    .describe("standard (default, rendered now) or economy (the model's economy price, done within its economy window)"),
  deadline: z
    .number()
    .int()
    .optional()
    .describe('Unix ms, at most 7 days ahead (standard tier): images not sent to the upstream by then are cancelled and refunded'),
};

export const batchRequestSchema = z.object(batchRequestShape);

/** The most generate_images waits, and what it waits when not told: under the 60 s many MCP clients allow a call. */
export const WAIT_DEFAULT_SECONDS = 50;
export const WAIT_MAX_SECONDS = 600;

export const generateImagesSchema = z.object({
  ...batchRequestShape,
  timeoutSeconds: z
    .number()
    .int()
    .min(1)
    .max(WAIT_MAX_SECONDS)
    .optional()
    .describe(
      `How long to wait for the images (default ${WAIT_DEFAULT_SECONDS}, at most ${WAIT_MAX_SECONDS}); when not done by then the batch id and status come back: follow it with batch_status`,
    ),
  idempotencyKey: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe(
      'Omit it: a retry of this call with the same arguments returns the same batch and is not charged again. Pass a new value to render the same arguments again as a new, charged batch',
    ),
});

export const batchIdSchema = z.object({
  batchId: z.string().min(1).describe('The batch id generate_images returned'),
});

export const batchStatusSchema = z.object({
  batchId: batchIdSchema.shape.batchId,
  waitSeconds: z
    .number()
    .int()
    .min(0)
    .max(WAIT_MAX_SECONDS)
    .optional()
    .describe(`Wait up to this long for the batch to finish before answering (default 0: answer now; at most ${WAIT_MAX_SECONDS})`),
});

/** The request part of generate_images' arguments, as the SDK sends it. */
export function batchRequestOf(args: z.infer<typeof generateImagesSchema>): CreateBatchRequest {
  // Every field of the request, in the schema's order, and nothing else (the idempotency key is
  // hashed from this, so it must not depend on the order the agent wrote its arguments in).
  const body: Record<string, unknown> = {};
  for (const key of Object.keys(batchRequestShape) as (keyof typeof batchRequestShape)[]) {
    if (args[key] !== undefined) body[key] = args[key];
  }
  return body as CreateBatchRequest;
}

// The type-level test: what the schema accepts is a CreateBatchRequest, and it names every field
// of one. A field added to, renamed in or retyped in the API's DTO (and so in the SDK's
// generated types) breaks one of these lines; mcp.schemas.spec.ts shows that they bite.
export type Assignable<T extends U, U> = T;
export type RequestFitsSdk = Assignable<z.infer<typeof batchRequestSchema>, CreateBatchRequest>;
export type SchemaNamesEveryField = Assignable<keyof CreateBatchRequest, keyof z.infer<typeof batchRequestSchema>>;
