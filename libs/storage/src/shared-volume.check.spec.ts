import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { SharedVolumeCheck, SharedVolumeError } from './shared-volume.check';

/** Against the run's real Redis; two temp directories play two containers' volumes. */
describe('SharedVolumeCheck (STORAGE_DRIVER=local needs one volume for every process)', () => {
  let redis: Redis;
  let volumeA: string;
  let volumeB: string;
  const started: SharedVolumeCheck[] = [];
  const redisPrefix = `${process.env.REDIS_PREFIX ?? 'kiln-test'}:shared-volume-${process.pid}`;

  beforeAll(async () => {
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    volumeA = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-vol-a-'));
    volumeB = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-vol-b-'));
  });
  afterEach(async () => {
    for (const check of started.splice(0)) await check.stop();
  });
  afterAll(async () => {
    await redis.quit();
    await fs.rm(volumeA, { recursive: true, force: true });
    await fs.rm(volumeB, { recursive: true, force: true });
  });

  /** Every "container" mounts its volume at the same DATA_DIR, /app/data. */
  const container = (volume: string, name = '/app/data') =>
    new SharedVolumeCheck({ redis, redisPrefix, dataDir: volume, volumeName: name });

  async function start(check: SharedVolumeCheck): Promise<SharedVolumeCheck> {
    await check.start();
    started.push(check);
    return check;
  }

  it('processes on one volume start; one on another volume under the same DATA_DIR is refused', async () => {
    await start(container(volumeA));
    await start(container(volumeA));
    const split = container(volumeB);
    await expect(split.start()).rejects.toThrow(SharedVolumeError);
    await expect(split.start()).rejects.toThrow(/do not share one volume/);
    // The refused process left nothing behind: no marker, no registration.
    expect(await fs.readdir(path.join(volumeB, '.kiln', 'instances'))).toEqual([]);
  });

  it('a stopped process no longer counts; other DATA_DIR names are other deployments', async () => {
    const first = await start(container(volumeA));
    await first.stop();
    started.splice(started.indexOf(first), 1);
    await start(container(volumeB));
    await start(container(volumeA, '/srv/other-kiln'));
  });

  it('a peer silent past three heartbeats is gone', async () => {
    const ghost = await start(container(volumeA));
    // Its last beat four minutes ago, as after a SIGKILL.
    const registry = (await redis.keys(`${redisPrefix}:storage:local-volume:*`))[0];
    await redis.hset(registry, ghost.instanceId, String(Date.now() - 4 * 60_000));
    await start(container(volumeB));
  });
});
