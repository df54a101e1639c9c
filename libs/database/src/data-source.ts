import { DataSource, DataSourceOptions } from 'typeorm';
import { ALL_ENTITIES } from './entities';
import { ALL_MIGRATIONS } from './migrations';

/** node-postgres pool settings of each app process. */
export const POOL = { max: 20 };

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

/** Runs pending migrations; returns the names of those applied. */
export async function runMigrations(databaseUrl: string): Promise<string[]> {
  const ds = createDataSource(databaseUrl, { extra: { max: 2 } });
  await ds.initialize();
  try {
    const applied = await ds.runMigrations({ transaction: 'each' });
    return applied.map((m) => m.name);
  } finally {
    await ds.destroy();
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
