#!/usr/bin/env bash
# npm start: Kiln on its embedded defaults. Makes PostgreSQL and Redis ready
# (scripts/ensure-services.sh), builds when the sources changed, runs the migrations, then
# runs the api and the generator until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
kiln_ensure_services

CLI=dist/apps/api/src/admin-cli.js
API_MAIN=dist/apps/api/src/main.js
GENERATOR_MAIN=dist/apps/generator/src/main.js

needs_build() {
  [ -f "$CLI" ] && [ -f "$API_MAIN" ] && [ -f "$GENERATOR_MAIN" ] && [ -f dist/web/index.html ] || return 0
  [ -n "$(find apps libs package.json tsconfig.json tsconfig.build.json -newer "$API_MAIN" -print -quit)" ]
}
if needs_build; then
  kiln_log "building (npm run build)"
  npm run --silent build
  for file in "$CLI" "$API_MAIN" "$GENERATOR_MAIN" dist/web/index.html; do
    [ -f "$file" ] || kiln_die "the build did not produce $file"
  done
fi

kiln_log "running migrations"
node "$CLI" migrate

admin_token_ref='$ADMIN_TOKEN'
if [ -z "${ADMIN_TOKEN:-}" ]; then
  if [ ! -s .kiln/admin-token ]; then
    mkdir -p .kiln
    (umask 077 && node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))' >.kiln/admin-token)
  fi
  ADMIN_TOKEN=$(cat .kiln/admin-token)
  export ADMIN_TOKEN
  admin_token_ref='$(cat .kiln/admin-token)'
  kiln_log "ADMIN_TOKEN (kept in .kiln/admin-token): $ADMIN_TOKEN"
fi

# Webhooks need a key to seal their signing secrets; in development one is made once and
# kept beside the admin token (production sets its own: docs/webhooks.md).
if [ -z "${WEBHOOK_SECRET_KEY:-}" ]; then
  if [ ! -s .kiln/webhook-secret-key ]; then
    mkdir -p .kiln
    (umask 077 && node -e 'console.log(require("crypto").randomBytes(32).toString("base64"))' >.kiln/webhook-secret-key)
  fi
  WEBHOOK_SECRET_KEY=$(cat .kiln/webhook-secret-key)
  export WEBHOOK_SECRET_KEY
  kiln_log "WEBHOOK_SECRET_KEY: development key kept in .kiln/webhook-secret-key"
fi

# What this run uses, for commands typed in another terminal (the CLI reads it: see
# libs/config/src/runtime-env.ts); removed when this run stops.
mkdir -p .kiln
(umask 077 && printf 'DATABASE_URL=%s\nREDIS_URL=%s\n' "$DATABASE_URL" "$REDIS_URL" >.kiln/runtime.env)

pids=()
# Starts NAME in the background, each line of its output prefixed with [NAME]. setsid keeps
# Ctrl-C from reaching it directly: it gets exactly one SIGTERM, from stop_all, and shuts
# down gracefully. The prefixing sed ignores both signals so the last log lines still show.
run_prefixed() {
  local name=$1
  shift
  setsid "$@" > >(trap '' INT TERM; exec sed -u "s/^/[$name] /") 2>&1 &
  pids+=("$!")
}

# A second Ctrl-C while the processes shut down kills them.
stop_all() {
  rm -f .kiln/runtime.env
  trap 'kill -KILL "${pids[@]}" 2>/dev/null || true' INT TERM
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local pid
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do wait "$pid" 2>/dev/null || true; done
  done
}
trap 'kiln_log "stopping"; stop_all; exit 130' INT
trap 'kiln_log "stopping"; stop_all; exit 143' TERM

# --max-old-space-size for the api too: polls at full speed grew its heap to ~470 MB over
# ~55 MB live without it, 318 MB with it (bench/findings.md, 2026-11-28 session 2); and a 32 MB
# semi-space, else the young generation alone grows to 128 MB (docker/Dockerfile).
run_prefixed api node --max-old-space-size=512 --max-semi-space-size=32 "$API_MAIN"
# Fewer glibc arenas and a fixed mmap threshold: 4K renders otherwise hold far more memory
# (docker/Dockerfile and bench/findings.md say how much). --max-old-space-size: V8 then grows
# the heap by ~1.4x what is live, not up to 4x (economy results: 340 -> ~200 MB).
MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072} \
  run_prefixed generator node --max-old-space-size=512 "$GENERATOR_MAIN"

all_running() {
  local pid
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || return 1; done
}
# The banner goes after the api's start-up logs, where it can be seen.
for _ in $(seq 1 120); do
  all_running || break
  node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' \
    "http://127.0.0.1:${PORT:-8080}/readyz" && break
  sleep 0.5
done

url=${PUBLIC_BASE_URL:-http://localhost:${PORT:-8080}}
url=${url%/}

all_running && cat >&2 <<EOF

[kiln] Kiln is running at $url (the api and the generator; Ctrl-C stops both)
[kiln] The web app: $url/app/ (sign up there; an operator grants credits and plans below)
[kiln] A first API key, for a demo account on the studio plan with credits (it finds this
[kiln] run's database through .kiln/runtime.env):
    eval "\$(node $CLI demo)"; echo \$KILN_API_KEY \$ACCOUNT_ID
[kiln] Or through the admin API:
    curl -s -X POST $url/v1/admin/accounts -H "Authorization: Bearer $admin_token_ref" \\
      -H 'Content-Type: application/json' -d '{"email":"you@example.com","plan":"studio","credits":1000}'
    curl -s -X POST $url/v1/admin/accounts/<account id>/keys -H "Authorization: Bearer $admin_token_ref"

EOF

# When either process ends on its own, stop the other and exit with its status.
status=0
wait -n "${pids[@]}" || status=$?
kiln_log "a process exited (status $status): stopping"
stop_all
exit "$status"
