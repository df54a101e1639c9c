import { batchStatusFromCounts, TaskCounts } from './batch-status';

const c = (pending: number, running: number, succeeded: number, failed: number): TaskCounts => ({ pending, running, succeeded, failed });

// The SQL form is held to this one over a grid of counts in test/batch-status.e2e-spec.ts.
describe('batchStatusFromCounts', () => {
  it.each([
    [c(3, 0, 0, 0), 'pending'],
    [c(2, 1, 0, 0), 'running'],
    [c(2, 0, 1, 0), 'running'],
    [c(0, 0, 3, 0), 'succeeded'],
    [c(0, 0, 2, 1), 'partial'],
    [c(0, 0, 0, 3), 'failed'],
  ])('%j -> %s', (counts, status) => {
    expect(batchStatusFromCounts('pending', counts)).toBe(status);
  });

  it('keeps cancelled', () => {
    expect(batchStatusFromCounts('cancelled', c(1, 0, 0, 0))).toBe('cancelled');
  });

  it('a batch without tasks keeps what is stored', () => {
    expect(batchStatusFromCounts('running', c(0, 0, 0, 0))).toBe('running');
  });
});
