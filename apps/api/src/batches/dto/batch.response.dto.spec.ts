import { DECORATORS } from '@nestjs/swagger/dist/constants';
import { batchObject, BatchView, PositionedTask, taskObject } from '@app/tasks';
import { BatchDto, CountsDto, TaskDto } from './batch.response.dto';

/** The property names a DTO class documents in the OpenAPI document. */
function documented(dto: abstract new () => unknown): string[] {
  const names: string[] = Reflect.getMetadata(DECORATORS.API_MODEL_PROPERTIES_ARRAY, dto.prototype) ?? [];
  return names.map((n) => n.replace(/^:/, '')).sort();
}

/**
 * The Batch and Task objects are built once, by the libs (batchObject, taskObject: the api's
 * answers and the webhook events carry them); the DTO classes only document them. A field
 * sent but not documented, or documented but never sent, fails here.
 */
describe('the documented wire shapes are the ones sent', () => {
  const view = {
    id: 'b',
    createdAt: new Date(1_700_000_000_123),
    prompts: ['p'],
    model: 'eta-image',
    aspectRatio: '1:1',
    resolution: '1K',
    quality: 'auto',
    background: null,
    countPerCombo: 2,
    refMode: 'none',
    refImages: [],
    total: 2,
    note: 'n',
    previewUrl: 'u',
    createdViaApi: true,
    status: 'partial',
    creditsCharged: 4,
    creditsRefunded: 2,
    cancelledAt: null,
    tier: 'economy',
    expiresAt: new Date(1_700_086_400_123),
    counts: { pending: 0, running: 0, succeeded: 1, failed: 1, cancelled: 0, cancelling: 0 },
    done: true,
    // A field the api does not show must not leak.
    accountId: 'secret-ish',
  } as unknown as BatchView;

  it('BatchDto documents exactly the fields of batchObject, counts included', () => {
    const sent = batchObject(view);
    expect(BatchDto.from(view)).toEqual(sent);
    expect(sent).toMatchObject({ tier: 'economy', expiresAt: 1_700_086_400_123 });
    expect(documented(BatchDto)).toEqual(Object.keys(sent).sort());
    expect(documented(CountsDto)).toEqual(Object.keys(sent.counts).sort());
  });

  it.each([
    { status: 'succeeded', resultUrl: 'https://x/r.png', error: null, errorCode: null, resultWidth: 1024, resultHeight: 576 },
    {
      status: 'failed',
      resultUrl: null,
      error: 'Simulated upstream failure',
      errorCode: 'upstream_unavailable',
      resultWidth: null,
      resultHeight: null,
    },
  ])('TaskDto documents exactly the fields of taskObject (%o)', (outcome) => {
    const task = {
      id: 't',
      batchId: 'b',
      seq: 3,
      prompt: 'p',
      progress: 100,
      index: 4,
      promptIndex: 1,
      refImage: 'https://x/u.png',
      copy: 2,
      cancelling: false,
      startedAt: 1767312000000,
      finishedAt: 1767312004200,
      ...outcome,
    } as PositionedTask;
    const sent = taskObject(task);
    expect(TaskDto.from(task)).toEqual(sent);
    expect(documented(TaskDto)).toEqual(Object.keys(sent).sort());
  });
});
