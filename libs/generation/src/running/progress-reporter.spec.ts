import { ProgressReporter } from './progress-reporter';

describe('ProgressReporter', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('writes nothing for a task that finishes within the first interval', () => {
    const writes: number[] = [];
    const p = new ProgressReporter((v) => void writes.push(v), 500);
    p.report(30);
    p.report(70);
    jest.advanceTimersByTime(400);
    p.stop();
    jest.advanceTimersByTime(1000);
    expect(writes).toEqual([]);
  });

  it('writes the latest value at most once per interval, clamped to 1..99, never going back', () => {
    const writes: number[] = [];
    const p = new ProgressReporter((v) => void writes.push(v), 500);
    p.report(10);
    p.report(30);
    jest.advanceTimersByTime(500);
    expect(writes).toEqual([30]);
    p.report(20);
    p.report(60);
    p.report(150);
    jest.advanceTimersByTime(200);
    expect(writes).toEqual([30]);
    jest.advanceTimersByTime(300);
    expect(writes).toEqual([30, 99]);
    p.report(99);
    jest.advanceTimersByTime(2000);
    expect(writes).toEqual([30, 99]);
  });

  it('writes nothing for a report the terminal state follows within the settle time', () => {
    const writes: number[] = [];
    const p = new ProgressReporter((v) => void writes.push(v), 500, 250);
    jest.advanceTimersByTime(1000);
    p.report(70);
    jest.advanceTimersByTime(200);
    p.stop();
    jest.advanceTimersByTime(1000);
    expect(writes).toEqual([]);

    const later = new ProgressReporter((v) => void writes.push(v), 500, 250);
    jest.advanceTimersByTime(1000);
    later.report(70);
    jest.advanceTimersByTime(249);
    expect(writes).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(writes).toEqual([70]);
  });

  it('swallows a failing write', () => {
    const p = new ProgressReporter(() => Promise.reject(new Error('db down')), 500);
    p.report(50);
    jest.advanceTimersByTime(600);
    p.stop();
  });
});
