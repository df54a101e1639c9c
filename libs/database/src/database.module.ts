import { DynamicModule, Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ALL_ENTITIES } from './entities';
import { dataSourceOptions } from './data-source';

export interface DatabaseModuleOptions {
  /**
   * `synchronous_commit = off` for this process's sessions: a commit returns (and releases
   * its row locks) before its WAL reaches the disk. Only for writes that a crash of
   * PostgreSQL may undo without harm, that is the generator's: every one of them is fenced
   * on the task's attempt, so an undone success or failure leaves the task `running`, the
   * reconciler runs it again, and its refund, if any, is made then, exactly once (a client
   * polling in that window of at most ~0.6 s may see a result that is then made again). The
   * gain: 100 tasks finishing together no longer queue one WAL flush each on their batch's
   * row lock. Never for the api, whose charges and answers a client acts on.
   */
  asyncCommit?: boolean;
}

@Global()
@Module({})
export class DatabaseModule {
  static forRoot(options: DatabaseModuleOptions = {}): DynamicModule {
    return {
      module: DatabaseModule,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [KILN_CONFIG],
          useFactory: (config: KilnConfig) =>
            dataSourceOptions(config.databaseUrl, {
              extra: {
                // A database that does not answer fails the request (503) instead of holding it.
                connectionTimeoutMillis: config.databaseConnectTimeoutMs,
                // A peer that vanished without a reset is noticed on idle connections too.
                keepAlive: true,
                max: config.databasePoolSize,
                ...(options.asyncCommit ? { options: '-c synchronous_commit=off' } : {}),
              },
            }),
        }),
        TypeOrmModule.forFeature(ALL_ENTITIES),
      ],
      exports: [TypeOrmModule],
    };
  }
}
