#!/usr/bin/env bash
# npm run test:browser: the web app's browser suite alone (test/browser, docs/web.md#tests),
# in Debian's Chromium driven by playwright-core, against a live Kiln on real PostgreSQL and
# Redis. Builds first (the api serves dist/web). `npm run docs:screenshots` runs it with
# KILN_UPDATE_SCREENSHOTS=1, which also refreshes docs/img/*.png. Arguments go to jest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
source scripts/chromium.sh
kiln_ensure_services
kiln_ensure_chromium
TEST_DATABASE_ADMIN_URL=$(kiln_db_url "$DATABASE_URL" postgres)
export TEST_DATABASE_ADMIN_URL

kiln_log "building (npm run build)"
npm run --silent build
exec npx jest --config jest.config.js --selectProjects browser "$@"
