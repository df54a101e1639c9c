import { PriorityLine } from './priority-line';
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

describe('PriorityLine', () => {
  it('serves by priority, then arrival, and makes nothing when nobody waits', async () => {
    const line = new PriorityLine<string>();
    const make = jest.fn(() => 'x');
    expect(line.serve(make)).toBe(false);
    expect(make).not.toHaveBeenCalled();

    const served: string[] = [];
    const waits = [
      line.join(3).then((v) => served.push(`p3:${v}`)),
      line.join().then((v) => served.push(`none:${v}`)),
      line.join(1).then((v) => served.push(`p1-a:${v}`)),
      line.join(1).then((v) => served.push(`p1-b:${v}`)),
    ];
    expect(line.length).toBe(4);
    let n = 0;
    while (line.serve(() => String(++n)));
    await Promise.all(waits);
    expect(served).toEqual(['p1-a:1', 'p1-b:2', 'p3:3', 'none:4']);
    expect(line.length).toBe(0);
  });

  it('an aborted waiter leaves the line, so the next serve goes to a live one', async () => {
    const line = new PriorityLine<number>();
    const controller = new AbortController();
    const first = line.join(1, controller.signal);
    const second = line.join(2);
    controller.abort(new Error('stop'));
    await expect(first).rejects.toThrow('stop');
    expect(line.length).toBe(1);
    expect(line.serve(() => 7)).toBe(true);
    await expect(second).resolves.toBe(7);
    await expect(line.join(1, controller.signal)).rejects.toThrow('stop');
    expect(line.length).toBe(0);
  });

  it('a served or rejected waiter stops listening to its signal', async () => {
    const line = new PriorityLine<number>();
    const controller = new AbortController();
    const remove = jest.spyOn(controller.signal, 'removeEventListener');
    const served = line.join(1, controller.signal);
    line.serve(() => 1);
    await expect(served).resolves.toBe(1);
    const rejected = line.join(1, controller.signal);
    line.rejectAll(new Error('redis down'));
    await expect(rejected).rejects.toThrow('redis down');
    expect(remove).toHaveBeenCalledTimes(2);
    controller.abort();
    expect(line.length).toBe(0);
  });
});
