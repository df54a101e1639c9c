import { batchObject, BatchView } from '@app/batches';
import { PositionedTask, taskObject } from '@app/tasks';
import { BatchDto, TaskDto } from './batch.response.dto';

/**
 * Webhook events carry the Batch and Task objects built by the libs (batchObject,
 * taskObject), which must be exactly what the api answers. A field added to one side only
 * fails here.
 */
describe('the wire shapes of libs and api agree', () => {
  it('batchObject equals BatchDto.from', () => {
    const view = {
      id: 'b', createdAt: new Date(1_700_000_000_123), prompts: ['p'], model: 'eta-image', aspectRatio: '1:1', resolution: '1K',
      quality: 'auto', background: null, countPerCombo: 2, refMode: 'none', refImages: [], total: 2, note: 'n', previewUrl: 'u',
      createdViaApi: true, status: 'partial', creditsCharged: 4, creditsRefunded: 2,
      counts: { pending: 0, running: 0, succeeded: 1, failed: 1 }, done: true,
      // A field the api does not show must not leak into either.
      accountId: 'secret-ish',
    } as unknown as BatchView;
    expect(batchObject(view)).toEqual(BatchDto.from(view));
    expect(Object.keys(batchObject(view)).sort()).toEqual(Object.keys(BatchDto.from(view)).sort());
  });

  it.each([
    { status: 'succeeded', resultUrl: 'https://x/r.png', error: null, errorCode: null, resultWidth: 1024, resultHeight: 576 },
    { status: 'failed', resultUrl: null, error: 'Simulated upstream failure', errorCode: 'upstream_unavailable', resultWidth: null, resultHeight: null },
  ])('taskObject equals TaskDto.from (%o)', (outcome) => {
    const view = { id: 't', batchId: 'b', seq: 3, prompt: 'p', progress: 100, index: 4, promptIndex: 1, refImage: 'https://x/u.png', copy: 2, ...outcome } as PositionedTask;
    expect(taskObject(view)).toEqual(TaskDto.from(view));
    expect(Object.keys(taskObject(view)).sort()).toEqual(Object.keys(TaskDto.from(view)).sort());
  });
});
