import { PrioritySemaphore } from './priority-semaphore';

describe('PrioritySemaphore', () => {
  it('admits up to its permits, then serves waiters by priority, then arrival', async () => {
    const s = new PrioritySemaphore(1);
    const order: string[] = [];
    const first = await s.acquire(5);
    const waits = [
      s.acquire(10).then((r) => (order.push('p10'), r)),
      s.acquire(2).then((r) => (order.push('p2-a'), r)),
      s.acquire(2).then((r) => (order.push('p2-b'), r)),
    ];
    expect(s.waiting).toBe(3);
    first();
    (await waits[1])();
    (await waits[2])();
    (await waits[0])();
    expect(order).toEqual(['p2-a', 'p2-b', 'p10']);
    expect(s.inUse).toBe(0);
  });

  it('a release is idempotent', async () => {
    const s = new PrioritySemaphore(2);
    const r = await s.acquire();
    r();
    r();
    expect(s.inUse).toBe(0);
    await s.acquire();
    await s.acquire();
    expect(s.inUse).toBe(2);
  });

  it('an aborted waiter leaves the line with the signal reason', async () => {
    const s = new PrioritySemaphore(1);
    const held = await s.acquire();
    const controller = new AbortController();
    const waiting = s.acquire(1, controller.signal);
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    expect(s.waiting).toBe(0);
    held();
    expect(s.inUse).toBe(0);
  });
});
