import { groupWrites } from './group-writes';

/** A write whose groups the test finishes by hand. */
function heldWrites() {
  const groups: { items: number[]; finish: () => void; fail: (err: Error) => void }[] = [];
  const write = (group: readonly number[]) =>
    new Promise<(string | Error)[]>((resolve, reject) => {
      groups.push({
        items: [...group],
        finish: () => resolve(group.map((n) => (n < 0 ? new Error(`bad ${n}`) : `done ${n}`))),
        fail: reject,
      });
    });
  return { groups, write };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('groupWrites', () => {
  it('writes items of one tick together, and items arriving during a write together in the next', async () => {
    const { groups, write } = heldWrites();
    const add = groupWrites(write, 100);
    const first = [add(1), add(2)];
    await settle();
    expect(groups.map((g) => g.items)).toEqual([[1, 2]]);

    const second = [add(3), add(4)];
    await settle();
    const third = add(5);
    await settle();
    // Still writing the first group: 3, 4 and 5 wait for it, then go as one.
    expect(groups).toHaveLength(1);
    groups[0].finish();
    await expect(Promise.all(first)).resolves.toEqual(['done 1', 'done 2']);
    await settle();
    expect(groups.map((g) => g.items)).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    groups[1].finish();
    await expect(Promise.all([...second, third])).resolves.toEqual(['done 3', 'done 4', 'done 5']);
  });

  it('splits a group larger than the maximum', async () => {
    const { groups, write } = heldWrites();
    const add = groupWrites(write, 2);
    const all = [1, 2, 3, 4, 5].map(add);
    await settle();
    expect(groups.map((g) => g.items)).toEqual([[1, 2], [3, 4], [5]]);
    groups.forEach((g) => g.finish());
    await expect(Promise.all(all)).resolves.toHaveLength(5);
  });

  it('rejects one item for its own error, and every item of a group whose write fails', async () => {
    const { groups, write } = heldWrites();
    const add = groupWrites(write, 100);
    const mixed = [add(1), add(-2)];
    await settle();
    groups[0].finish();
    await expect(mixed[0]).resolves.toBe('done 1');
    await expect(mixed[1]).rejects.toThrow('bad -2');

    const doomed = [add(3), add(4)];
    await settle();
    groups[1].fail(new Error('connection lost'));
    await expect(Promise.all(doomed.map((p) => p.catch((e: Error) => e.message)))).resolves.toEqual(['connection lost', 'connection lost']);

    // A failed write does not hold the next group back.
    const after = add(6);
    await settle();
    groups[2].finish();
    await expect(after).resolves.toBe('done 6');
  });
});
