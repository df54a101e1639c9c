#!/usr/bin/env bash
# npm test: the whole suite, unit and e2e, against real PostgreSQL and Redis. Arguments go
# to jest (npm test -- test/auth.e2e-spec.ts). The suite creates its own database and Redis
# prefix per run, so here only the servers matter: TEST_DATABASE_ADMIN_URL is the server's
# `postgres` database, the connection the suite creates and drops its databases through.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
source scripts/chromium.sh
kiln_ensure_services
# The browser project (test/browser) runs with the rest unless the arguments leave it out.
if kiln_runs_browser_tests "$@"; then kiln_ensure_chromium; fi
kiln_ensure_kubectl
TEST_DATABASE_ADMIN_URL=$(kiln_db_url "$DATABASE_URL" postgres)
export TEST_DATABASE_ADMIN_URL

# Some e2e specs spawn the built generator; the browser specs need the built web app (dist/web).
kiln_log "building (npm run build)"
npm run --silent build
# jest transpiles each file alone; the specs' types are checked here, with the code's.
kiln_log "type-checking code and tests (npm run typecheck)"
npm run --silent typecheck

exec npx jest --config jest.config.js --maxWorkers=2 "$@"
