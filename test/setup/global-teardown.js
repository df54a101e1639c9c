const { Client } = require('pg');
const fs = require('node:fs');
const Redis = require('ioredis');

module.exports = async function globalTeardown() {
  if (process.env.KILN_KEEP_TEST_DB) return;
  const admin = new Client({ connectionString: process.env.KILN_TEST_ADMIN_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${process.env.KILN_TEST_DB_NAME}" WITH (FORCE)`);
  await admin.end();

  const redis = new Redis(process.env.REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${process.env.REDIS_PREFIX}:*`, 'COUNT', 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
  fs.rmSync(process.env.DATA_DIR, { recursive: true, force: true });
};
