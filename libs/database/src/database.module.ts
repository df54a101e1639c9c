import { DynamicModule, Global, Logger, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, DataSourceOptions } from 'typeorm';
import { BootDependencyError, hostOf, KILN_CONFIG, KilnConfig } from '@app/config';
import { ALL_ENTITIES } from './entities';
import { dataSourceOptions } from './data-source';
import { runStatementsUnnamed } from './query';

export interface DatabaseModuleOptions {
  /**
   * `synchronous_commit = off` for this process's sessions: a commit returns (and releases
   * its row locks) before its WAL reaches the disk. Only for writes that a crash of
   * PostgreSQL may undo without harm, that is the generator's: every one of them is fenced
   * on the task's attempt, so an undone success or failure leaves the task `running`, the
   * reconciler runs it again, and its refund, if any, is made then, exactly once (a client
   * polling in that window of at most ~0.6 s may see a result that is then made again). The
   * gain: 100 tasks finishing together no longer queue one WAL flush each on their batch's
   * row lock. Never for the api, whose charges and answers a client acts on. Such a commit is
   * visible before it is durable: what Kiln acts on outside the database for good is written or
   * claimed by a statement that commits synchronously (WebhookSender's CLAIM, before an event is
   * sent; UpstreamWaitStore's RECORD_GROUP, a queue upstream's request id).
   */
  asyncCommit?: boolean;
  /**
   * `plan_cache_mode = force_custom_plan`: every run of a prepared statement is planned with
   * its parameters and the tables' sizes of the moment. For the generator, whose grouped
   * writes PostgreSQL would otherwise plan once for good after five runs: made while `tasks`
   * was small (a fresh install, a quiet hour) that plan is a sequential scan, and it stays one
   * until an ANALYZE of the table (never, with autovacuum off) however large the table grows.
   * Planning a run costs a few percent of the statement (bench/findings.md, 2026-11-27 session 3).
   */
  customPlans?: boolean;
}

/** The `-c` startup settings of DatabaseModuleOptions, for the libpq `options` parameter. */
export function sessionStartupOptions(options: DatabaseModuleOptions): string | undefined {
  const settings = [
    ...(options.asyncCommit ? ['synchronous_commit=off'] : []),
    ...(options.customPlans ? ['plan_cache_mode=force_custom_plan'] : []),
  ];
  return settings.length > 0 ? settings.map((s) => `-c ${s}`).join(' ') : undefined;
}

/** The client's own timeout comes this long after the server's, which cancels cleanly. */
const CLIENT_TIMEOUT_GRACE_MS = 2000;

type KilnDataSourceOptions = DataSourceOptions & { toRetry?: () => boolean; preparedStatements?: boolean };

/**
 * Settings each connection starts its session with (startup parameters). Only on a direct
 * connection: a transaction-mode pooler refuses them (PgBouncer 1.18: "unsupported startup
 * parameter"), and a session setting would not follow a client across the pooler's server
 * connections anyway; there the pooler sets the timeout (docs/operations.md, PgBouncer), the
 * generator's commits stay synchronous, and its statements are unnamed, so planned on every
 * run anyway.
 */
function sessionSettings(config: KilnConfig, options: DatabaseModuleOptions): Record<string, unknown> {
  const startup = sessionStartupOptions(options);
  return {
    statement_timeout: config.databaseQueryTimeoutMs,
    ...(startup ? { options: startup } : {}),
  };
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
          // Our own bounded retry (connectAtBoot) instead of Nest's nine retries 3 s apart.
          dataSourceFactory: async (options?: DataSourceOptions) => {
            const source = await connectAtBoot(options!);
            if (!(options as KilnDataSourceOptions).preparedStatements) runStatementsUnnamed(source);
            return source;
          },
          useFactory: (config: KilnConfig): KilnDataSourceOptions => ({
            toRetry: () => false,
            preparedStatements: config.databasePreparedStatements,
            ...dataSourceOptions(config.databaseUrl, {
              extra: {
                // A database that does not answer fails the request (503) instead of holding it.
                connectionTimeoutMillis: config.databaseConnectTimeoutMs,
                // A peer that vanished without a reset is noticed on idle connections too.
                keepAlive: true,
                // A slow statement is cancelled by PostgreSQL; a server that answers nothing at
                // all (frozen, or packets dropped) is given up on by the client a little later.
                // Either way the request answers 503 instead of hanging (isDatabaseUnavailable).
                query_timeout: config.databaseQueryTimeoutMs + CLIENT_TIMEOUT_GRACE_MS,
                max: config.databasePoolSize,
                ...(config.databasePreparedStatements ? sessionSettings(config, options) : {}),
              },
            }),
          }),
        }),
        TypeOrmModule.forFeature(ALL_ENTITIES),
      ],
      exports: [TypeOrmModule],
    };
  }
}

/**
 * Refusals are retried until this long after the process started (a compose stack starting
 * together), counted from the start because loading the code alone can take seconds.
 */
const BOOT_RETRY_DEADLINE_MS = 6500;
const BOOT_RETRY_DELAY_MS = 1000;
/** Errors that come back at once and may clear up in seconds; a timeout has already waited. */
const TRANSIENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', '57P03']);

/**
 * Connects, retrying refusals for a few seconds, so a process whose PostgreSQL is missing
 * stops within 10 s naming the host and the cause (a BootDependencyError, logged without a
 * stack) instead of after half a minute of stack traces.
 */
async function connectAtBoot(options: DataSourceOptions): Promise<DataSource> {
  const url = (options as { url?: string }).url ?? '';
  let told = false;
  for (;;) {
    try {
      return await new DataSource(options).initialize();
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      const cause = `${code && !(err as Error).message.includes(code) ? `${code}: ` : ''}${(err as Error).message}`;
      if (!TRANSIENT_CODES.has(code) || process.uptime() * 1000 + BOOT_RETRY_DELAY_MS > BOOT_RETRY_DEADLINE_MS) {
        throw new BootDependencyError('PostgreSQL', hostOf(url, 5432), cause);
      }
      if (!told)
        new Logger('Database').warn(`PostgreSQL at ${hostOf(url, 5432)} is not reachable yet (${cause}); retrying for a few seconds`);
      told = true;
      await new Promise((resolve) => setTimeout(resolve, BOOT_RETRY_DELAY_MS));
    }
  }
}
