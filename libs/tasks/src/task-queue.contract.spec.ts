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
    expect(renderJob(id)).toEqual({ name: 'render', data: { taskId: id }, opts: { jobId: id, attempts: 1 } });
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
