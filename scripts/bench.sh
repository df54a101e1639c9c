#!/usr/bin/env bash
# npm run bench [-- <scenario>... <flags>]: Kiln's benchmarks (bench/run.ts lists the
# scenarios and flags). Makes PostgreSQL and Redis ready (scripts/ensure-services.sh), builds,
# then runs the bench, which starts its own Kiln on a fresh database and Redis prefix and
# removes both when it ends. A run of every scenario writes bench/results/latest.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
kiln_ensure_services

kiln_log "building (npm run build)"
npm run --silent build

exec node dist/bench/run.js "$@"
