import { nextRenderJob, renderJob, renderJobId, TASK_QUEUE, TaskJob } from './task-queue.contract';

describe('the task queue contract', () => {
  const id = '0f8fad5b-d9cb-469f-a165-70867728950e';

  it('keeps the deployed names (jobs in Redis carry them)', () => {
    expect(TASK_QUEUE).toBe('kiln-tasks');
    expect(TaskJob.Render).toBe('render');
  });

  it('the first attempt runs under the task id, as dispatched; later ones under their own', () => {
    expect(renderJobId(id, 0)).toBe(id);
    expect(renderJobId(id, 1)).toBe(`${id}-attempt2`);
    expect(renderJobId(id, 3)).toBe(`${id}-attempt4`);
  });

  it('a first job is the task id with one Bull attempt and no delay', () => {
    expect(renderJob({ id })).toEqual({ name: 'render', data: { taskId: id }, opts: { jobId: id, attempts: 1 } });
  });

  it('carries the batch id and seq as hints only when both are known; they never change the job id', () => {
    const batchId = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
    expect(renderJob({ id, batchId, seq: 0 })).toEqual({
      name: 'render',
      data: { taskId: id, batchId, seq: 0 },
      opts: { jobId: id, attempts: 1 },
    });
    // A task taken before (a retry, a takeover) is marked a rerun: first in the generator's lines.
    expect(nextRenderJob({ id, attempts: 1, batchId, seq: 4 }).data).toEqual({ taskId: id, batchId, seq: 4, rerun: true });
    expect(nextRenderJob({ id, attempts: 0, batchId, seq: 4 }).data).toEqual({ taskId: id, batchId, seq: 4 });
    expect(nextRenderJob({ id, attempts: 1, batchId, seq: 4 }).opts.jobId).toBe(`${id}-attempt2`);
    expect(renderJob({ id, batchId }).data).toEqual({ taskId: id });
  });

  it('adds the delay, and no Bull priority (a prioritized add walks the whole wait list)', () => {
    const job = nextRenderJob({ id, attempts: 2 }, 1500);
    expect(job).toEqual({
      name: 'render',
      data: { taskId: id },
      opts: { jobId: `${id}-attempt3`, delay: 1500, attempts: 1 },
    });
    expect(nextRenderJob({ id, attempts: 1 }).opts).not.toHaveProperty('delay');
  });
});
