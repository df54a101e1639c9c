import { randomBytes } from 'node:crypto';
import { buildConfig } from '@app/config';
import { RedisScript, RedisService } from '@app/redis';

/** RedisScript against real Redis: called by its SHA1, and sent whole only when Redis lacks it. */
describe('RedisScript', () => {
  const redis = new RedisService(buildConfig(process.env));
  afterAll(() => redis.onApplicationShutdown());
  afterEach(() => jest.restoreAllMocks());

  it('runs by EVALSHA, sending the body with EVAL only on NOSCRIPT (first use, or after Redis forgot it)', async () => {
    // A body no one has loaded yet: its first call meets NOSCRIPT.
    const script = new RedisScript(`-- ${randomBytes(8).toString('hex')}\nreturn {KEYS[1], ARGV[1], ARGV[2]}`);
    const evalsha = jest.spyOn(redis.client, 'evalsha');
    const evalBody = jest.spyOn(redis.client, 'eval');
    const key = redis.key('script-test');
    expect(await script.run(redis.client, [key], ['a', 7])).toEqual([key, 'a', '7']);
    expect(evalsha).toHaveBeenCalledTimes(1);
    expect(evalBody).toHaveBeenCalledTimes(1);
    expect(await script.run(redis.client, [key], ['b', 8])).toEqual([key, 'b', '8']);
    expect(evalsha).toHaveBeenCalledTimes(2);
    expect(evalBody).toHaveBeenCalledTimes(1);
    expect(evalsha.mock.calls[1][0]).toBe(script.sha);
  });

  it('passes any other error on', async () => {
    const script = new RedisScript(`-- ${randomBytes(8).toString('hex')}\nreturn redis.error_reply('KILN broken')`);
    await expect(script.run(redis.client, [redis.key('script-test')], [])).rejects.toThrow('KILN broken');
  });
});
