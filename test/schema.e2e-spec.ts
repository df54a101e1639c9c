import { DataSource } from 'typeorm';
import { ALL_MIGRATIONS, pendingSchemaDrift } from '@app/database';

/** Entities and migrations must agree: a forgotten migration fails CI here. */
describe('database schema', () => {
  it('the migrations produce exactly the schema the entities describe', async () => {
    expect(await pendingSchemaDrift(process.env.DATABASE_URL as string)).toEqual([]);
  });

  it('every migration has run and is registered in order', async () => {
    const ds = new DataSource({ type: 'postgres', url: process.env.DATABASE_URL });
    await ds.initialize();
    try {
      const rows = await ds.query(`SELECT name FROM migrations ORDER BY id`);
      const names = ALL_MIGRATIONS.map((m) => m.name);
      expect(rows.map((r: { name: string }) => r.name)).toEqual(names);
      const stamps = names.map((n) => Number(/(\d{13})$/.exec(n)?.[1]));
      expect([...stamps].sort((a, b) => a - b)).toEqual(stamps);
    } finally {
      await ds.destroy();
    }
  });

  it('seeds four plans and sixteen models', async () => {
    const ds = new DataSource({ type: 'postgres', url: process.env.DATABASE_URL });
    await ds.initialize();
    try {
      const plans = await ds.query(
        `SELECT key, api_access, max_keys, max_images_per_batch, max_concurrent_batches FROM plans ORDER BY max_images_per_batch`,
      );
      expect(plans).toEqual([
        { key: 'free', api_access: false, max_keys: 0, max_images_per_batch: 4, max_concurrent_batches: 1 },
        { key: 'starter', api_access: true, max_keys: 2, max_images_per_batch: 10, max_concurrent_batches: 1 },
        { key: 'studio', api_access: true, max_keys: 5, max_images_per_batch: 50, max_concurrent_batches: 10 },
        { key: 'scale', api_access: true, max_keys: 10, max_images_per_batch: 100, max_concurrent_batches: 20 },
      ]);
      const [{ n }] = await ds.query(`SELECT count(*)::int AS n FROM models`);
      expect(n).toBe(16);
    } finally {
      await ds.destroy();
    }
  });
});
