#!/usr/bin/env bash
# The README's quick start, run as written on a fresh clone: npm ci, npm start, the demo key
# (eval "$(node dist/apps/api/src/admin-cli.js demo)"), the first API calls, a batch to done. Not
# part of npm test (it installs and starts a whole Kiln); CI runs it on a fresh checkout.
#
#   scripts/test-readme.sh                 clone HEAD into a temporary directory and test that
#   KILN_README_NODE_MODULES=<dir>         reuse an installed node_modules (hard-linked) instead of npm ci
#
# It uses the services npm start finds (or its fallbacks), with a database and Redis prefix
# of its own and a free port, so a Kiln already running on this machine is left alone.
set -euo pipefail
unset ADMIN_TOKEN # npm start makes one and keeps it in .kiln/admin-token, as the README says
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
log() { printf '[test-readme] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; [ -f "$work/start.log" ] && tail -n 40 "$work/start.log" >&2; exit 1; }

git clone -q "$repo" "$work/kiln"
cd "$work/kiln"
git -C "$repo" diff HEAD --quiet || log "note: uncommitted changes in $repo are not tested"
if [ -n "${KILN_README_NODE_MODULES:-}" ]; then
  # A hard-linked copy, never a symlink: should anything run npm ci here, it must only ever
  # empty this clone's copy. A fresh .package-lock.json dates the install after the clone's
  # lock, so npm start does not reinstall.
  cp -al "$KILN_README_NODE_MODULES" node_modules
  rm -f node_modules/.package-lock.json
  cp "$KILN_README_NODE_MODULES/.package-lock.json" node_modules/.package-lock.json
else
  log "npm ci"
  npm ci --no-audit --no-fund >"$work/npm-ci.log" 2>&1 || { tail -n 30 "$work/npm-ci.log" >&2; fail "npm ci"; }
fi

port=$(node -e 'const s=require("net").createServer().listen(0,()=>{console.log(s.address().port);s.close()})')
suffix=$(node -e 'console.log(require("crypto").randomBytes(4).toString("hex"))')
base_db=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/kiln}
readme_db="${base_db%/*}/kiln_readme_$suffix"
export PORT=$port REDIS_PREFIX="kiln-readme-$suffix" DATABASE_URL=$readme_db
node -e '
  const { Client } = require("pg");
  const url = new URL(process.argv[1]); const name = url.pathname.slice(1); url.pathname = "/postgres";
  const c = new Client({ connectionString: url.toString() });
  c.connect().then(() => c.query(`CREATE DATABASE "${name}"`)).then(() => c.end(), () => c.end());
' "$DATABASE_URL" || true

cleanup() {
  # npm does not pass SIGTERM on to its script: the whole process group gets it, so
  # scripts/start.sh stops the api and the generator, and is waited for (at most 60 s).
  if [ -n "${start_pid:-}" ]; then
    kill -TERM -- "-$start_pid" 2>/dev/null || true
    for _ in $(seq 1 300); do pgrep -g "$start_pid" >/dev/null || break; sleep 0.2; done
  fi
  node -e '
    const { Client } = require("pg");
    const url = new URL(process.argv[1]); const name = url.pathname.slice(1); url.pathname = "/postgres";
    const c = new Client({ connectionString: url.toString() });
    c.connect().then(() => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => c.end(), () => c.end());
  ' "$readme_db" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

log "npm start (port $port)"
setsid npm start >"$work/start.log" 2>&1 &
start_pid=$! # the leader of npm start's own process group
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  kill -0 "$start_pid" 2>/dev/null || fail "npm start exited"
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || fail "Kiln did not become ready"
[ -f .kiln/runtime.env ] || fail "npm start wrote no .kiln/runtime.env"

# The README's own lines: the quick start's second block, then the API section's first,
# with the README's port replaced by this run's.
block() { # <heading> <n>: the n-th bash block under that heading
  awk -v h="$1" -v n="$2" '
    /^## / { inside = ($0 == h) }
    inside && /^```bash/ { k++; if (k == n) { on = 1; next } }
    on && /^```/ { on = 0 }
    on { print }' README.md | sed "s/localhost:8080/localhost:$port/g"
}
quick=$(block '## Quick start' 2)
api=$(block '## The API' 1)
[ -n "$quick" ] && [ -n "$api" ] || fail "README blocks not found"
log "README quick start:"; printf '%s\n' "$quick" >&2
unset DATABASE_URL # as in another terminal: the CLI must find the database through .kiln/runtime.env
eval "$quick" >"$work/quick.out" || fail "the quick start's commands"
[[ "${KILN_API_KEY:-}" == kiln_live_* ]] || fail "KILN_API_KEY was not set"
# Exported too: the commands the README runs next (npx kiln) read it from their environment.
node -e 'process.exit(process.env.KILN_API_KEY ? 0 : 1)' || fail "KILN_API_KEY was set but not exported"
[[ "${ACCOUNT_ID:-}" =~ ^[0-9a-f-]{36}$ ]] || fail "ACCOUNT_ID was not set"
grep -q '"balance"' "$work/quick.out" || fail "GET /v1/me did not answer: $(cat "$work/quick.out")"
# The third block: from the key to a folder of images with the kiln command line.
images=$(block '## Quick start' 3)
[ -n "$images" ] || fail "README kiln submit block not found"
log "README kiln submit:"; printf '%s\n' "$images" >&2
eval "$images" >"$work/submit.out" 2>"$work/submit.err" || fail "the quick start's kiln submit: $(cat "$work/submit.err")"
[ "$(find images -name 'kiln-*.png' | wc -l)" -eq 3 ] || fail "kiln submit did not leave 3 images in images/"
log "README API calls:"; printf '%s\n' "$api" >&2
eval "$api" >"$work/api.out" || fail "the API section's commands"
grep -q '"models"' "$work/api.out" || fail "GET /v1/models did not answer"

H="Authorization: Bearer $KILN_API_KEY"
created=$(curl -sf -X POST "$KILN_URL/v1/batches" -H "$H" -H 'Content-Type: application/json' \
  -d '{"prompts":["a red fox in the snow","a lighthouse at dusk"],"model":"beta-2","aspectRatio":"16:9","countPerCombo":2,"note":"demo"}') \
  || fail "POST /v1/batches"
id=$(node -e 'console.log(JSON.parse(process.argv[1]).id)' "$created")
for _ in $(seq 1 120); do
  body=$(curl -sf "$KILN_URL/v1/batches/$id" -H "$H") || fail "GET /v1/batches/$id"
  [ "$(node -e 'console.log(JSON.parse(process.argv[1]).batch.done)' "$body")" = true ] && break
  sleep 1
done
status=$(node -e 'console.log(JSON.parse(process.argv[1]).batch.status)' "$body")
[ "$status" = succeeded ] || fail "the README's batch ended $status"
curl -sf -H "Authorization: Bearer $ADMIN_TOKEN" "$KILN_URL/v1/admin/accounts/$ACCOUNT_ID" >/dev/null || fail "admin API with ACCOUNT_ID"
# The dashboard block, pasted into the same shell after the quick start: a new account gets a
# working key, and the demo account keeps its plan.
dashboard=$(block '## Dashboard API: from signup to a working key' 1)
[ -n "$dashboard" ] || fail "README dashboard block not found"
log "README dashboard API:"; printf '%s\n' "$dashboard" >&2
eval "$dashboard" >"$work/dashboard.out" || fail "the dashboard block's commands"
[[ "${KEY:-}" == kiln_live_* ]] || fail "the dashboard block left KEY=${KEY:-}"
grep -q '"balance"' "$work/dashboard.out" || fail "the dashboard key did not answer GET /v1/me"
demo_plan=$(curl -sf -H "Authorization: Bearer $ADMIN_TOKEN" "$KILN_URL/v1/admin/accounts/$ACCOUNT_ID" | node -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.parse(s).account.plan))')
[ "$demo_plan" = studio ] || fail "the dashboard block changed the demo account's plan to $demo_plan"
# demo again says that it replaced the key it made before.
node dist/apps/api/src/admin-cli.js demo >/dev/null 2>"$work/demo2.err" || fail "demo, a second time"
grep -q 'Revoked the earlier demo key' "$work/demo2.err" || fail "a second demo did not say it replaced the key: $(cat "$work/demo2.err")"
# npm start made a development WEBHOOK_SECRET_KEY: creating an endpoint is no 503, and a
# loopback URL's refusal names the setting that allows it.
[ -s .kiln/webhook-secret-key ] || fail "npm start made no .kiln/webhook-secret-key"
hook=$(curl -s -X POST "$KILN_URL/v1/webhooks" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"url":"http://127.0.0.1:9/hook"}')
[[ "$hook" == *WEBHOOK_ALLOW_PRIVATE* ]] || fail "a loopback webhook URL's refusal: $hook"
log "OK: the README's commands work on a fresh clone"
