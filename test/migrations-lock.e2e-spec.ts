import { Client } from 'pg';
import { ALL_MIGRATIONS, MIGRATION_LOCK_KEY, runMigrations } from '@app/database';

/**
 * Migrations run under a PostgreSQL advisory lock: api replicas and the compose `migrate`
 * service start together on one database, and each migration must be applied exactly once.
 */
describe('migrations under an advisory lock', () => {
  const adminUrl = process.env.KILN_TEST_ADMIN_URL as string;
  let dbName: string;
  /** The runs' connection: through the pooler in `npm run test:pgbouncer`, else direct. */
  let dbUrl: string;
  /** Straight to PostgreSQL, for a session that holds a session lock. */
  let directUrl: string;

  async function admin<T>(fn: (c: Client) => Promise<T>, url = adminUrl): Promise<T> {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }

  beforeEach(async () => {
    dbName = `${process.env.KILN_TEST_DB_NAME}_mig_${Math.random().toString(36).slice(2, 8)}`.slice(0, 63);
    await admin((c) => c.query(`CREATE DATABASE "${dbName}"`));
    const url = new URL(adminUrl);
    url.pathname = `/${dbName}`;
    directUrl = url.toString();
    const pooled = new URL(process.env.TEST_DATABASE_POOLER_URL || adminUrl);
    pooled.pathname = `/${dbName}`;
    dbUrl = pooled.toString();
  });

  afterEach(async () => {
    await admin((c) => c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`));
  });

  const appliedRows = () =>
    admin(async (c) => (await c.query<{ name: string }>('SELECT name FROM migrations ORDER BY id')).rows.map((r) => r.name), dbUrl);

  it('four runs started at once on a fresh database all succeed, and each migration is applied once', async () => {
    const runs = await Promise.all([1, 2, 3, 4].map(() => runMigrations(dbUrl)));
    const names = ALL_MIGRATIONS.map((m) => m.name);
    // Exactly one run applied each migration; the others found it done.
    expect(runs.flat().sort()).toEqual([...names].sort());
    expect(await appliedRows()).toEqual(names);
    // Nothing is left holding the lock (a session lock released on another pooled connection would be).
    const held = await admin(
      (c) =>
        c.query(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          [MIGRATION_LOCK_KEY],
        ),
      directUrl,
    );
    expect(held.rows[0].n).toBe(0);
  });

  it('waits while another session holds the lock, then applies everything', async () => {
    const holder = new Client({ connectionString: directUrl });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      let waiting!: () => void;
      const waited = new Promise<void>((resolve) => (waiting = resolve));
      const run = runMigrations(dbUrl, { onWait: () => waiting() });
      await waited;
      // Nothing ran while the lock was held: not even the migrations table exists.
      const { rows } = await holder.query(`SELECT to_regclass('public.migrations') AS t`);
      expect(rows[0].t).toBeNull();
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      expect(await run).toEqual(ALL_MIGRATIONS.map((m) => m.name));
    } finally {
      await holder.end();
    }
  });

  it('gives up with a clear error when the lock is not released in time', async () => {
    const holder = new Client({ connectionString: directUrl });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      await expect(runMigrations(dbUrl, { lockWaitMs: 300 })).rejects.toThrow(/migration lock/);
    } finally {
      await holder.end();
    }
  });
});
