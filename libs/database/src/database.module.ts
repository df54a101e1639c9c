import { DynamicModule, Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ALL_ENTITIES } from './entities';
import { dataSourceOptions } from './data-source';

@Global()
@Module({})
export class DatabaseModule {
  static forRoot(): DynamicModule {
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [KILN_CONFIG],
          useFactory: (config: KilnConfig) => dataSourceOptions(config.databaseUrl),
        }),
        TypeOrmModule.forFeature(ALL_ENTITIES),
      ],
      exports: [TypeOrmModule],
    };
  }
}
