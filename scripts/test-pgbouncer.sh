#!/usr/bin/env bash
# npm run test:pgbouncer [-- jest args]: the e2e suite's database-heavy specs with Kiln behind
# PgBouncer in transaction mode, as a Kubernetes deployment with a pooler runs it
# (docs/operations.md, PgBouncer). Not part of npm test.
#
# Starts a private pgbouncer (Debian's, installed with apt-get when missing: 1.18, without
# protocol-level prepared statements) on its own port (KILN_PGBOUNCER_PORT, default 16432),
# in front of the PostgreSQL that npm test uses, and runs the specs with
# DATABASE_PREPARED_STATEMENTS=false and TEST_DATABASE_POOLER_URL: the apps, the spawned
# generators and the specs' own queries go through the pooler; only creating and dropping the
# run's databases goes straight to PostgreSQL. The pooler sets the statement timeout on its
# server connections (connect_query), as docs/operations.md tells operators to.
# Then the chaos harness's quick run with its own PostgreSQL behind its own PgBouncer
# (npm run chaos -- --quick --pgbouncer): crashes and freezes of PostgreSQL, Redis and the
# generators with the pooler in between, and the money invariants after.
# Arguments go to jest instead of the default spec list, and skip the chaos run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
kiln_ensure_services
TEST_DATABASE_ADMIN_URL=$(kiln_db_url "$DATABASE_URL" postgres)
export TEST_DATABASE_ADMIN_URL

PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
if [ ! -x "$PGBOUNCER" ]; then
  kiln_apt_install pgbouncer || kiln_die "pgbouncer is not installed and could not be (Debian/Ubuntu: apt-get install pgbouncer)"
  PGBOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
fi

PORT=${KILN_PGBOUNCER_PORT:-16432}
QUERY_TIMEOUT_MS=${DATABASE_QUERY_TIMEOUT_MS:-10000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-pgbouncer.XXXXXX")
stop_pgbouncer() {
  local status=$?
  if [ -f "$WORK/pgbouncer.pid" ]; then
    kill "$(cat "$WORK/pgbouncer.pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do [ -f "$WORK/pgbouncer.pid" ] || break; sleep 0.1; done
  fi
  [ "$status" -eq 0 ] || { kiln_log "the pooler's log:"; tail -20 "$WORK/pgbouncer.log" >&2 || true; }
  rm -rf "$WORK"
  exit "$status"
}
trap stop_pgbouncer EXIT

# The server to pool: host, port, user and password of DATABASE_URL. Every database name
# maps to the same one on the server ("*"), so each jest run's own database goes through.
read -r PG_HOST PG_PORT PG_USER PG_PASSWORD < <(node -e '
  const u = new URL(process.argv[1]);
  const host = u.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
  console.log([host, u.port || "5432", decodeURIComponent(u.username) || "postgres", decodeURIComponent(u.password) || "-"].join(" "));
' "$DATABASE_URL")
server="host=$PG_HOST port=$PG_PORT user=$PG_USER"
[ "$PG_PASSWORD" = - ] || server="$server password=$PG_PASSWORD"

# PgBouncer refuses to run as root; its files then belong to the user it runs as.
RUN_AS=()
if [ "$(id -u)" = 0 ]; then
  RUN_AS=(-u nobody)
  chown nobody "$WORK"
fi
cat >"$WORK/pgbouncer.ini" <<EOF
[databases]
* = $server connect_query='SET statement_timeout = $QUERY_TIMEOUT_MS'

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
pidfile = $WORK/pgbouncer.pid
logfile = $WORK/pgbouncer.log
; Clients log in as anyone; the pooler logs in to PostgreSQL as the user above.
auth_type = any
pool_mode = transaction
; Fewer server connections than the clients' pools add up to, as in production.
default_pool_size = 20
max_client_conn = 2000
; No ignore_startup_parameters: Kiln must send none that PgBouncer 1.18 refuses.
EOF
chmod 644 "$WORK/pgbouncer.ini"
"$PGBOUNCER" -d "${RUN_AS[@]}" "$WORK/pgbouncer.ini" || kiln_die "pgbouncer did not start: $(tail -5 "$WORK/pgbouncer.log" 2>/dev/null)"
for _ in $(seq 1 50); do kiln_pg_answers 127.0.0.1 "$PORT" && break; sleep 0.1; done
kiln_log "$("$PGBOUNCER" --version | head -1) in transaction mode on 127.0.0.1:$PORT, pooling $PG_HOST:$PG_PORT"

kiln_log "building (npm run build)"
npm run --silent build

# The specs whose every step is SQL: money, tasks, the generator in and out of process,
# webhooks' outbox and sender, keys, migrations.
SPECS=(
  test/prepared-statements.e2e-spec.ts
  test/migrations-lock.e2e-spec.ts
  test/auth.e2e-spec.ts
  test/admin.e2e-spec.ts
  test/ledger.e2e-spec.ts
  test/batches.e2e-spec.ts
  test/batches-concurrency.e2e-spec.ts
  test/batch-cancel.e2e-spec.ts
  test/batch-polling.e2e-spec.ts
  test/batch-status.e2e-spec.ts
  test/idempotency-and-estimate.e2e-spec.ts
  test/task-details-and-archive.e2e-spec.ts
  test/generator.e2e-spec.ts
  test/generator-recovery.e2e-spec.ts
  test/generator-process.e2e-spec.ts
  test/webhooks.e2e-spec.ts
  test/webhooks-delivery.e2e-spec.ts
)
CHAOS=1
[ $# -gt 0 ] && { SPECS=("$@"); CHAOS=; }

export TEST_DATABASE_POOLER_URL="postgres://$PG_USER@127.0.0.1:$PORT/postgres"
export DATABASE_PREPARED_STATEMENTS=false
npx jest --config jest.config.js --maxWorkers=2 "${SPECS[@]}"

# The run really went through the pooler: it logged the clients' logins to the run's databases.
logins=$(grep -c 'login attempt: db=kiln_test_' "$WORK/pgbouncer.log" || true)
[ "$logins" -gt 0 ] || kiln_die "no client logged in through pgbouncer"
kiln_log "PASS: $logins client connections went through pgbouncer in transaction mode"

if [ -n "$CHAOS" ]; then
  kiln_ensure_pg_binaries || kiln_die "the embedded PostgreSQL binaries are unusable (npm ci)"
  command -v redis-server >/dev/null 2>&1 || kiln_apt_install redis-server || kiln_die "redis-server is not installed"
  kiln_log "the chaos quick run through its own PgBouncer"
  (unset DATABASE_PREPARED_STATEMENTS TEST_DATABASE_POOLER_URL; node dist/bench/chaos/run.js --quick --pgbouncer)
fi
