#!/usr/bin/env bash
# The batch search at 100,000 batches (bench/findings.md): a scratch database, dropped after.
set -euo pipefail
ADMIN=${TEST_DATABASE_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=kiln_bench_search_$$
psql "$ADMIN" -qc "CREATE DATABASE $DB"
trap 'psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $DB"' EXIT
psql "${ADMIN%/*}/$DB" -v ON_ERROR_STOP=1 -f "$(dirname "$0")/batch-search.sql"
