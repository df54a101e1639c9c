import type { RedisService } from '@app/redis';
import { ANNOUNCE_GATHER_MS, BatchChangePublisher } from './batch-changes';

/** A RedisService whose pipelines record what they would publish. */
function recordingRedis() {
  const sent: string[][] = [];
  const redis = {
    key: (...parts: string[]) => `t:${parts.join(':')}`,
    client: {
      pipeline: () => {
        const channels: string[] = [];
        const pipeline = {
          publish: (channel: string) => {
            channels.push(channel);
            return pipeline;
          },
          exec: () => {
            sent.push(channels);
            return Promise.resolve([]);
          },
        };
        return pipeline;
      },
    },
  } as unknown as RedisService;
  return { redis, sent };
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('BatchChangePublisher', () => {
  it('gathers the announcements of a short window: a batch changed by several writes is published once', async () => {
    const { redis, sent } = recordingRedis();
    const publisher = new BatchChangePublisher(redis);
    publisher.announce(['a', 'b']);
    publisher.announce(['b']);
    await wait(1);
    publisher.announce(['a', 'c']);
    expect(sent).toEqual([]);
    await wait(ANNOUNCE_GATHER_MS + 20);
    expect(sent).toEqual([['t:batch-changed:a', 't:batch-changed:b', 't:batch-changed:c']]);

    // The next window starts afresh.
    publisher.announce(['a']);
    await wait(ANNOUNCE_GATHER_MS + 20);
    expect(sent).toEqual([['t:batch-changed:a', 't:batch-changed:b', 't:batch-changed:c'], ['t:batch-changed:a']]);
  });

  it('publishes a finished batch at once, with what had gathered, and nothing for an empty one', async () => {
    const { redis, sent } = recordingRedis();
    const publisher = new BatchChangePublisher(redis);
    publisher.announceFinished([]);
    expect(sent).toEqual([]);
    publisher.announce(['a']);
    publisher.announceFinished(['f']);
    expect(sent).toEqual([['t:batch-changed:a', 't:batch-changed:f']]);
    await wait(ANNOUNCE_GATHER_MS + 20);
    expect(sent).toHaveLength(1);
  });

  it('publishes what has gathered when the module stops, and nothing for an empty announcement', async () => {
    const { redis, sent } = recordingRedis();
    const publisher = new BatchChangePublisher(redis);
    publisher.announce([]);
    publisher.onModuleDestroy();
    expect(sent).toEqual([]);
    publisher.announce(['x']);
    publisher.onModuleDestroy();
    expect(sent).toEqual([['t:batch-changed:x']]);
    await wait(ANNOUNCE_GATHER_MS + 20);
    expect(sent).toHaveLength(1);
  });
});
