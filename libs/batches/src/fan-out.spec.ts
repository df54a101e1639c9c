import { fanOut, imageCount } from './fan-out';

describe('fanOut (docs/api.md#image-count-per-refmode)', () => {
  it('none: prompts x copies, no references', () => {
    expect(fanOut(2, [], 'none', 2)).toEqual([
      { seq: 0, promptIndex: 0, refUploadIds: [] },
      { seq: 1, promptIndex: 0, refUploadIds: [] },
      { seq: 2, promptIndex: 1, refUploadIds: [] },
      { seq: 3, promptIndex: 1, refUploadIds: [] },
    ]);
    expect(imageCount(2, 0, 'none', 2)).toBe(4);
  });

  it('each: prompt, then reference, then copy; one reference per task', () => {
    const tasks = fanOut(2, ['r0', 'r1'], 'each', 2);
    expect(tasks.map((t) => [t.promptIndex, t.refUploadIds[0]])).toEqual([
      [0, 'r0'], [0, 'r0'], [0, 'r1'], [0, 'r1'],
      [1, 'r0'], [1, 'r0'], [1, 'r1'], [1, 'r1'],
    ]);
    expect(tasks.map((t) => t.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(imageCount(2, 2, 'each', 2)).toBe(tasks.length);
  });

  it('combined: every reference on every task, count unaffected by references', () => {
    const tasks = fanOut(3, ['r0', 'r1', 'r2'], 'combined', 1);
    expect(tasks).toHaveLength(3);
    for (const t of tasks) expect(t.refUploadIds).toEqual(['r0', 'r1', 'r2']);
    expect(imageCount(3, 3, 'combined', 1)).toBe(3);
  });
});
