import { withinRedisDeadline } from './redis-deadline';

describe('withinRedisDeadline', () => {
  it('answers what the call answers when it comes in time', async () => {
    await expect(withinRedisDeadline(Promise.resolve('OK'), 50)).resolves.toBe('OK');
    await expect(withinRedisDeadline(Promise.reject(new Error('NOSCRIPT')), 50)).rejects.toThrow('NOSCRIPT');
  });

  it('rejects when the call does not answer within the deadline', async () => {
    const never = new Promise<string>(() => undefined);
    await expect(withinRedisDeadline(never, 20)).rejects.toThrow('Redis did not answer within 20 ms');
  });
});
