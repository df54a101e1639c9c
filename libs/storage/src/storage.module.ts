import { BeforeApplicationShutdown, Global, Inject, Logger, Module, OnApplicationBootstrap, OnModuleInit, Optional } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { RedisService } from '@app/redis';
import { SharedVolumeCheck } from './shared-volume.check';
import { LocalStorageDriver } from './local.storage-driver';
import { MinioStorageDriver } from './minio.storage-driver';
import { StorageDriver } from './storage.driver';

export function createStorageDriver(config: KilnConfig): StorageDriver {
  return config.storage.driver === 'minio'
    ? new MinioStorageDriver(config.storage.minio)
    : new LocalStorageDriver({ dataDir: config.storage.dataDir, publicBaseUrl: config.publicBaseUrl });
}

/** Global so the api and the generator get one driver without each feature importing it. */
@Global()
@Module({
  providers: [{ provide: StorageDriver, useFactory: createStorageDriver, inject: [KILN_CONFIG] }],
  exports: [StorageDriver],
})
export class StorageModule implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(StorageModule.name);
  private volumeCheck: SharedVolumeCheck | null = null;

  constructor(
    @Inject(StorageDriver) private readonly driver: StorageDriver,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    @Optional() private readonly redis?: RedisService,
  ) {}

  /** Boot fails early when the bucket or directory cannot be created, not on the first upload. */
  async onModuleInit(): Promise<void> {
    await this.driver.init();
  }

  /** After every module's init, so the Redis connection has had its moment to come up. */
  async onApplicationBootstrap(): Promise<void> {
    if (this.config.storage.driver !== 'local' || !this.redis) return;
    if (!this.redis.connected) {
      this.logger.warn('Redis is not reachable: skipped the check that every process sees the same DATA_DIR');
      return;
    }
    const check = new SharedVolumeCheck({
      redis: this.redis.client,
      redisPrefix: this.config.redisPrefix,
      dataDir: this.config.storage.dataDir,
    });
    await check.start();
    this.volumeCheck = check;
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.volumeCheck?.stop();
  }
}
