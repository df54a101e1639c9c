import { Global, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LocalStorageDriver } from './local.storage-driver';
import { MinioStorageDriver } from './minio.storage-driver';
import { StorageDriver } from './storage.driver';
import { createStorageDriver, StorageModule } from './storage.module';

function configWith(storage: Partial<KilnConfig['storage']>): KilnConfig {
  return {
    publicBaseUrl: 'http://localhost:8080',
    storage: {
      driver: 'local',
      dataDir: '/unused',
      retentionDays: 30,
      minio: {
        endPoint: '127.0.0.1',
        port: 9000,
        useSSL: false,
        accessKey: 'a',
        secretKey: 'b',
        bucket: 'kiln',
        publicUrl: 'http://127.0.0.1:9000/kiln',
      },
      ...storage,
    },
  } as KilnConfig;
}

describe('StorageModule', () => {
  it('picks the driver from config.storage.driver', () => {
    expect(createStorageDriver(configWith({ driver: 'local' }))).toBeInstanceOf(LocalStorageDriver);
    expect(createStorageDriver(configWith({ driver: 'minio' }))).toBeInstanceOf(MinioStorageDriver);
  });

  it('provides StorageDriver and runs init() on module init', async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'kiln-storage-module-'));
    // Stands in for KilnConfigModule, which would read process.env.
    @Global()
    @Module({
      providers: [{ provide: KILN_CONFIG, useValue: configWith({ driver: 'local', dataDir }) }],
      exports: [KILN_CONFIG],
    })
    class TestConfigModule {}

    try {
      const app = await Test.createTestingModule({ imports: [TestConfigModule, StorageModule] }).compile();
      await app.init();
      expect(app.get(StorageDriver)).toBeInstanceOf(LocalStorageDriver);
      expect((await fs.stat(path.join(dataDir, 'files'))).isDirectory()).toBe(true);
      await app.close();
    } finally {
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
