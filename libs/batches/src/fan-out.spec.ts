import { fanOut, imageCount, taskPosition } from './fan-out';

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
      [0, 'r0'],
      [0, 'r0'],
      [0, 'r1'],
      [0, 'r1'],
      [1, 'r0'],
      [1, 'r0'],
      [1, 'r1'],
      [1, 'r1'],
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

describe('taskPosition: the inverse of fanOut', () => {
  it('agrees with fanOut for every refMode and task', () => {
    const urls = ['u0', 'u1', 'u2'];
    for (const refMode of ['none', 'each', 'combined'] as const) {
      const refImages = refMode === 'none' ? [] : urls;
      for (const countPerCombo of [1, 3]) {
        const tasks = fanOut(
          2,
          refImages.map((u) => `id-${u}`),
          refMode,
          countPerCombo,
        );
        const copies = new Map<string, number>();
        for (const t of tasks) {
          const p = taskPosition(t.seq, { refMode, refImages, countPerCombo });
          const refImage = refMode === 'each' ? t.refUploadIds[0].slice(3) : null;
          const combo = `${t.promptIndex}:${refImage}`;
          copies.set(combo, (copies.get(combo) ?? 0) + 1);
          expect(p).toEqual({ index: t.seq + 1, promptIndex: t.promptIndex, refImage, copy: copies.get(combo) });
        }
      }
    }
  });

  it('the documented example: A+r1, A+r1, A+r2, A+r2, B+r1, ...', () => {
    const batch = { refMode: 'each' as const, refImages: ['r1', 'r2'], countPerCombo: 2 };
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((seq) => taskPosition(seq, batch))).toEqual([
      { index: 1, promptIndex: 0, refImage: 'r1', copy: 1 },
      { index: 2, promptIndex: 0, refImage: 'r1', copy: 2 },
      { index: 3, promptIndex: 0, refImage: 'r2', copy: 1 },
      { index: 4, promptIndex: 0, refImage: 'r2', copy: 2 },
      { index: 5, promptIndex: 1, refImage: 'r1', copy: 1 },
      { index: 6, promptIndex: 1, refImage: 'r1', copy: 2 },
      { index: 7, promptIndex: 1, refImage: 'r2', copy: 1 },
      { index: 8, promptIndex: 1, refImage: 'r2', copy: 2 },
    ]);
  });
});
