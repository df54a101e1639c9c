import { nextRenderJob, renderJobId } from './render-jobs';

describe('render job ids', () => {
  const id = '0f8fad5b-d9cb-469f-a165-70867728950e';

  it('the first attempt runs under the task id, as dispatched; later ones under their own', () => {
    expect(renderJobId(id, 0)).toBe(id);
    expect(renderJobId(id, 1)).toBe(`${id}-attempt2`);
    expect(renderJobId(id, 3)).toBe(`${id}-attempt4`);
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
