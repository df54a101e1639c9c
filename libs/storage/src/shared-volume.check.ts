import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type Redis from 'ioredis';

/** How often a process says it is alive; a peer silent for three beats is gone. */
const BEAT_MS = 60_000;
const ALIVE_MS = 3 * BEAT_MS;

export interface SharedVolumeOptions {
  redis: Redis;
  /** The run's Redis key prefix (KilnConfig.redisPrefix). */
  redisPrefix: string;
  /** KilnConfig.storage.dataDir. */
  dataDir: string;
  /**
   * What processes that must share one volume have in common: DATA_DIR as configured, the
   * same path in every container of a deployment (tests give two directories one name to
   * play two containers without a shared volume).
   */
  volumeName?: string;
}

export class SharedVolumeError extends Error {}

/**
 * With STORAGE_DRIVER=local the api serves the files the generators write, so every process
 * of a deployment must see one directory. Containers without a shared volume would each
 * write their own: batches succeed and every URL answers 404. Each process therefore leaves
 * a marker file under DATA_DIR and registers it in Redis under DATA_DIR's name; a process
 * that cannot see the marker of a live peer registered under the same name does not share
 * its volume, and refuses to start. Without Redis the check is skipped (said in the log):
 * it must not stop a lone process from starting during a Redis outage.
 */
export class SharedVolumeCheck {
  readonly instanceId = randomUUID();
  private readonly registry: string;
  private readonly markerDir: string;
  private beat: NodeJS.Timeout | null = null;

  constructor(private readonly options: SharedVolumeOptions) {
    const name = options.volumeName ?? path.resolve(options.dataDir);
    const digest = createHash('sha256').update(name).digest('hex').slice(0, 16);
    this.registry = `${options.redisPrefix}:storage:local-volume:${digest}`;
    this.markerDir = path.join(path.resolve(options.dataDir), '.kiln', 'instances');
  }

  /** Registers this process, then refuses when a live peer's marker is not visible here. */
  async start(): Promise<void> {
    await fs.mkdir(this.markerDir, { recursive: true });
    await fs.writeFile(this.marker(this.instanceId), `${process.pid}\n`);
    const { redis } = this.options;
    const now = Date.now();
    const peers = await redis.hgetall(this.registry);
    await redis
      .multi()
      .hset(this.registry, this.instanceId, String(now))
      .pexpire(this.registry, ALIVE_MS * 2)
      .exec();
    const unseen: string[] = [];
    for (const [id, at] of Object.entries(peers)) {
      if (id === this.instanceId || now - Number(at) > ALIVE_MS) continue;
      if (!(await exists(this.marker(id)))) unseen.push(id);
    }
    if (unseen.length > 0) {
      await this.stop();
      throw new SharedVolumeError(
        `STORAGE_DRIVER=local: ${unseen.length} other Kiln process(es) store files under DATA_DIR=${this.options.dataDir} ` +
          'but this process cannot see them, so they do not share one volume and the api would answer 404 for ' +
          'images the generators stored. Mount one volume at DATA_DIR in every api and generator container, ' +
          'or use STORAGE_DRIVER=minio.',
      );
    }
    this.beat = setInterval(() => void this.heartbeat(), BEAT_MS);
    this.beat.unref();
  }

  async stop(): Promise<void> {
    if (this.beat) clearInterval(this.beat);
    this.beat = null;
    await this.options.redis.hdel(this.registry, this.instanceId).catch(() => undefined);
    await fs.rm(this.marker(this.instanceId), { force: true }).catch(() => undefined);
  }

  private async heartbeat(): Promise<void> {
    await this.options.redis
      .multi()
      .hset(this.registry, this.instanceId, String(Date.now()))
      .pexpire(this.registry, ALIVE_MS * 2)
      .exec()
      .catch(() => undefined);
  }

  private marker(id: string): string {
    return path.join(this.markerDir, id);
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}
