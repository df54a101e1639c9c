import { Global, Inject, Module, OnModuleInit } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
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
export class StorageModule implements OnModuleInit {
  constructor(@Inject(StorageDriver) private readonly driver: StorageDriver) {}

  /** Boot fails early when the bucket or directory cannot be created, not on the first upload. */
  async onModuleInit(): Promise<void> {
    await this.driver.init();
  }
}
