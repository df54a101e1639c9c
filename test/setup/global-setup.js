// Gives the whole jest run its own PostgreSQL database and Redis prefix, so a run never
// collides with a running Kiln or another run. Workers inherit the environment set here.
const { Client } = require('pg');
const os = require('node:os');
const fs = require('node:fs');
const path = require('node:path');

module.exports = async function globalSetup() {
  require('ts-node').register({ transpileOnly: true, project: path.join(__dirname, '../../tsconfig.json') });
  require('tsconfig-paths').register({
    baseUrl: path.join(__dirname, '../..'),
    paths: require('../../tsconfig.json').compilerOptions.paths,
  });
  const runId = `${Date.now().toString(36)}_${process.pid}`;
  const adminUrl = process.env.TEST_DATABASE_ADMIN_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `kiln_test_${runId}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${dbName}"`);
  await admin.end();

  // TEST_DATABASE_POOLER_URL (npm run test:pgbouncer): the apps and specs reach the run's
  // database through that pooler; creating and dropping it stays on the direct connection.
  const url = new URL(process.env.TEST_DATABASE_POOLER_URL || adminUrl);
  url.pathname = `/${dbName}`;
  process.env.DATABASE_URL = url.toString();
  process.env.REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  process.env.REDIS_PREFIX = `kiln-test-${runId}`;
  process.env.NODE_ENV = 'test';
  process.env.ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';
  process.env.DATA_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-test-'));
  process.env.PUBLIC_BASE_URL = 'http://kiln.test';
  process.env.LOG_LEVEL = process.env.LOG_LEVEL || 'silent';
  // Every test request comes from 127.0.0.1 and many test 401s on purpose: the per-address
  // and per-session throttles are tested with their own low limits, not the defaults.
  process.env.AUTH_FAILURES_PER_IP_PER_MINUTE = process.env.AUTH_FAILURES_PER_IP_PER_MINUTE || '100000';
  process.env.DASHBOARD_REQUESTS_PER_MINUTE = process.env.DASHBOARD_REQUESTS_PER_MINUTE || '100000';
  // Webhook secrets are sealed under it; a fixed test value (never a real deployment's).
  process.env.WEBHOOK_SECRET_KEY = process.env.WEBHOOK_SECRET_KEY || Buffer.alloc(32, 7).toString('base64');
  process.env.KILN_TEST_DB_NAME = dbName;
  process.env.KILN_TEST_ADMIN_URL = adminUrl;

  const { runMigrations } = require('../../libs/database/src/data-source');
  await runMigrations(process.env.DATABASE_URL);
};
