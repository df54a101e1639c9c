import type { ClaimedTask } from '@app/tasks';
import { PriorityLine } from '../../limits/priority-line';
import { hintPriority, priorityOf, RERUN_PRIORITY } from './run-steps';

const claim = (seq: number, attempts: number): ClaimedTask => ({ seq, attempts }) as ClaimedTask;

describe('the local lines order: a batch n-th task before any (n+1)-th, reruns first', () => {
  it('a first attempt stands by its seq; a task taken before stands ahead of every first attempt', () => {
    expect(priorityOf(claim(7, 1))).toBe(7);
    expect(priorityOf(claim(900, 2))).toBe(RERUN_PRIORITY);
    expect(hintPriority({ batchId: 'b', seq: 7 })).toBe(7);
    expect(hintPriority({ batchId: 'b', seq: 900, rerun: true })).toBe(RERUN_PRIORITY);
    expect(RERUN_PRIORITY).toBeLessThan(0);
  });

  it("a taken-over task deep in its batch is served before newer batches' first tasks that joined earlier", async () => {
    const line = new PriorityLine<number>();
    const served: string[] = [];
    const wait = (name: string, priority: number): Promise<void> => line.join(priority).then(() => void served.push(name));
    const waits = [
      wait('new batch, seq 0', hintPriority({ batchId: 'a', seq: 0 })),
      wait('new batch, seq 1', hintPriority({ batchId: 'b', seq: 1 })),
      wait('taken over, seq 900', hintPriority({ batchId: 'c', seq: 900, rerun: true })),
    ];
    for (let i = 0; i < waits.length; i++) line.serve(() => i);
    await Promise.all(waits);
    expect(served).toEqual(['taken over, seq 900', 'new batch, seq 0', 'new batch, seq 1']);
  });
});
