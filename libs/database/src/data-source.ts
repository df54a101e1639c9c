import { DataSource, DataSourceOptions } from 'typeorm';
import { ALL_ENTITIES } from './entities';
import { ALL_MIGRATIONS } from './migrations';

/** node-postgres pool settings of each app process unless told otherwise (DATABASE_POOL_SIZE). */
const POOL = { max: 20 };

/** The one description of Kiln's database, used by both apps, the CLI and the tests. */
export function dataSourceOptions(databaseUrl: string, extra: Partial<DataSourceOptions> = {}): DataSourceOptions {
  return {
    type: 'postgres',
    url: databaseUrl,
    entities: ALL_ENTITIES,
    migrations: ALL_MIGRATIONS,
    migrationsTransactionMode: 'each',
    // gen_random_uuid() is built into PostgreSQL 13+, so no extension needs installing.
    uuidExtension: 'pgcrypto',
    // Schema changes only ever come from migrations.
    synchronize: false,
    migrationsRun: false,
    extra: POOL,
    ...extra,
  } as DataSourceOptions;
}

export function createDataSource(databaseUrl: string, extra: Partial<DataSourceOptions> = {}): DataSource {
  return new DataSource(dataSourceOptions(databaseUrl, extra));
}

/**
 * The advisory lock every migration run holds: two api replicas (or a compose `migrate`
 * service and an api) starting together on one database would otherwise both apply the same
 * migration, and one of them crash on what the other created.
 */
export const MIGRATION_LOCK_KEY = 727_301_947;
/** How long a run waits for another one to finish before giving up. */
const MIGRATION_LOCK_WAIT_MS = 5 * 60_000;
const MIGRATION_LOCK_POLL_MS = 250;

export interface MigrationOptions {
  /** Told once when another run holds the lock, so a waiting start-up says why it waits. */
  onWait?: () => void;
  lockWaitMs?: number;
}

/**
 * Runs pending migrations under MIGRATION_LOCK_KEY; returns the names of those applied. A run
 * that waited for another finds the migrations applied and returns an empty list.
 *
 * The lock is a transaction's (pg_try_advisory_xact_lock), held by a transaction left open on
 * its own connection while the migrations run on another: behind a transaction-mode pooler
 * (PgBouncer) an open transaction keeps its server connection, where a session lock would be
 * taken on one server connection, left there, and "released" on another. It goes when the
 * transaction ends, or with the connection if the process dies.
 */
export async function runMigrations(databaseUrl: string, options: MigrationOptions = {}): Promise<string[]> {
  // One connection holds the lock, the other runs the migrations.
  const ds = createDataSource(databaseUrl, { extra: { max: 2, connectionTimeoutMillis: 10_000 } });
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    await lock.startTransaction();
    try {
      await acquireMigrationLock(lock, options);
      const applied = await ds.runMigrations({ transaction: 'each' });
      return applied.map((m) => m.name);
    } finally {
      await lock.rollbackTransaction();
    }
  } finally {
    await lock.release();
    await ds.destroy();
  }
}

/**
 * Polls pg_try_advisory_xact_lock rather than blocking in pg_advisory_xact_lock, so the wait
 * is bounded. A failed try takes nothing, so the transaction stays fit to try again.
 */
async function acquireMigrationLock(
  lock: { query(sql: string, params?: unknown[]): Promise<Array<{ locked: boolean }>> },
  options: MigrationOptions,
): Promise<void> {
  const deadline = Date.now() + (options.lockWaitMs ?? MIGRATION_LOCK_WAIT_MS);
  let told = false;
  for (;;) {
    const [{ locked }] = await lock.query('SELECT pg_try_advisory_xact_lock($1) AS locked', [MIGRATION_LOCK_KEY]);
    if (locked) return;
    if (!told) {
      told = true;
      options.onWait?.();
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `Another migration run has held the migration lock for over ${Math.round((options.lockWaitMs ?? MIGRATION_LOCK_WAIT_MS) / 1000)} s; giving up`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, MIGRATION_LOCK_POLL_MS));
  }
}

/** SQL the entities would need beyond the migrations: empty when the two agree. */
export async function pendingSchemaDrift(databaseUrl: string): Promise<string[]> {
  const ds = createDataSource(databaseUrl, { extra: { max: 2 } });
  await ds.initialize();
  try {
    const sql = await ds.driver.createSchemaBuilder().log();
    return sql.upQueries.map((q) => q.query);
  } finally {
    await ds.destroy();
  }
}
