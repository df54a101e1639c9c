import { batchStatusFromCounts, TaskCounts } from './batch-status';

const c = (pending: number, running: number, succeeded: number, failed: number, cancelled = 0): TaskCounts => ({
  pending,
  running,
  succeeded,
  failed,
  cancelled,
});

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

  it.each([
    [c(0, 0, 2, 1, 1), 'cancelled'],
    [c(0, 0, 0, 0, 3), 'cancelled'],
    [c(0, 1, 0, 0, 2), 'running'],
    [c(1, 0, 0, 0, 2), 'running'],
  ])('with cancelled tasks %j -> %s: cancelled once done', (counts, status) => {
    expect(batchStatusFromCounts('running', counts)).toBe(status);
  });

  it('a batch without tasks keeps what is stored', () => {
    expect(batchStatusFromCounts('running', c(0, 0, 0, 0))).toBe('running');
  });
});
