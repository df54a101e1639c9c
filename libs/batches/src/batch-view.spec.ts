import { deriveStatus, TaskCounts } from './batch-view';

const c = (pending: number, running: number, succeeded: number, failed: number): TaskCounts => ({ pending, running, succeeded, failed });

describe('deriveStatus (decisions.md 2)', () => {
  it.each([
    [c(3, 0, 0, 0), 'pending'],
    [c(2, 1, 0, 0), 'running'],
    [c(2, 0, 1, 0), 'running'],
    [c(0, 0, 3, 0), 'succeeded'],
    [c(0, 0, 2, 1), 'partial'],
    [c(0, 0, 0, 3), 'failed'],
  ])('%j -> %s', (counts, status) => {
    expect(deriveStatus('pending', counts)).toBe(status);
  });

  it('keeps cancelled', () => {
    expect(deriveStatus('cancelled', c(1, 0, 0, 0))).toBe('cancelled');
  });
});
