import { z } from 'zod';
import type { CreateBatchRequest } from '@app/sdk';
import { idempotencyKeyOf } from './mcp.server';
import { Assignable, batchRequestOf, batchRequestShape, generateImagesSchema } from './mcp.schemas';

/*
 * The type-level half runs in the typecheck (`npx tsc -p tsconfig.json --noEmit`, which `npm
 * test` runs first): mcp.schemas.ts asserts that its batch request fits the SDK's
 * CreateBatchRequest and names every field of it. The drifted schemas below show the two checks
 * bite: each @ts-expect-error line fails the typecheck if its check stopped rejecting the drift.
 */
const _retyped = z.object({ ...batchRequestShape, resolution: z.enum(['1K', '8K']).optional() });
// @ts-expect-error a value the API does not take ('8K') is not a CreateBatchRequest
export type RetypedFieldFails = Assignable<z.infer<typeof _retyped>, CreateBatchRequest>;

const { seed: _seed, ...withoutSeed } = batchRequestShape;
const _missing = z.object(withoutSeed);
// @ts-expect-error a field of the API's request (seed) that the schema does not name
export type MissingFieldFails = Assignable<keyof CreateBatchRequest, keyof z.infer<typeof _missing>>;

describe('kiln mcp schemas', () => {
  const args = generateImagesSchema.parse({
    timeoutSeconds: 30,
    countPerCombo: 2,
    model: 'm',
    prompts: ['a fox'],
  });

  it('the request sent is the batch fields only, in the schema order whatever the order of the arguments', () => {
    const request = batchRequestOf(args);
    expect(request).toEqual({ prompts: ['a fox'], model: 'm', countPerCombo: 2 });
    expect(Object.keys(request)).toEqual(['prompts', 'model', 'countPerCombo']);
  });

  it('the idempotency key: the same call in a session is the same key; another request, session or given key is another', () => {
    const request = batchRequestOf(args);
    const key = idempotencyKeyOf('s1', request, undefined);
    expect(key).toMatch(/^mcp-[0-9a-f]{40}$/);
    expect(
      idempotencyKeyOf('s1', batchRequestOf(generateImagesSchema.parse({ prompts: ['a fox'], model: 'm', countPerCombo: 2 })), undefined),
    ).toBe(key);
    expect(idempotencyKeyOf('s1', { ...request, countPerCombo: 3 }, undefined)).not.toBe(key);
    expect(idempotencyKeyOf('s2', request, undefined)).not.toBe(key);
    // An agent's own key holds across sessions (a retry after the server restarted).
    expect(idempotencyKeyOf('s1', request, 'again')).toBe(idempotencyKeyOf('s2', request, 'again'));
    expect(idempotencyKeyOf('s1', request, 'again')).not.toBe(key);
  });

  it('timeoutSeconds is bounded: 1 to 600', () => {
    expect(generateImagesSchema.safeParse({ prompts: ['a'], model: 'm', timeoutSeconds: 601 }).success).toBe(false);
    expect(generateImagesSchema.safeParse({ prompts: ['a'], model: 'm', timeoutSeconds: 0 }).success).toBe(false);
    expect(generateImagesSchema.safeParse({ prompts: ['a'], model: 'm', timeoutSeconds: 600 }).success).toBe(true);
  });
});
