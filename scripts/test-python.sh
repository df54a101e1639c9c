#!/usr/bin/env bash
# The Python client's suite (clients/python/tests, pytest) against a real Kiln this script
# starts: a virtual environment of its own in a temporary directory, the package installed
# into it with its test and lint extras (httpx, pytest, mypy, ruff) from the machine's package
# index, mypy --strict and ruff on the sources, then Kiln (built when the sources changed) on a
# fresh database and Redis prefix, a free port and a data folder of its own, the api and one
# generator, and a demo account's key; after the suite, the README's Python example (fox.py)
# against the same Kiln. Everything it started is stopped, and the database dropped, on exit.
# Part of CI (.ci/run), not of npm test.
#
#   scripts/test-python.sh [pytest arguments]      e.g. -k webhook -x
#
# PYTHON names the interpreter (default python3; 3.10 or later). The packages come from pip's
# own configuration (a machine mirror given as extra-index-url is used as the index itself, so
# nothing is asked of pypi.org there).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-services.sh
log() { printf '[test-python] %s\n' "$*" >&2; }
work=$(mktemp -d)

cleanup() {
  local pid
  for pid in ${api_pid:-} ${generator_pid:-}; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in ${api_pid:-} ${generator_pid:-}; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -n "${test_db:-}" ]; then
    node -e '
      const { Client } = require("pg");
      const url = new URL(process.argv[1]); const name = decodeURIComponent(url.pathname.slice(1)); url.pathname = "/postgres";
      const c = new Client({ connectionString: url.toString() });
      c.connect().then(() => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => c.end(), () => c.end());
    ' "$test_db" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { log "kiln-client needs Python 3.10 or later ($python is $("$python" --version 2>&1))"; exit 1; }

# --- the package, in a venv of its own -----------------------------------------------------
mirrors=$("$python" -m pip config get global.extra-index-url 2>/dev/null || true)
if [ -n "$mirrors" ] && [ -z "${PIP_INDEX_URL:-}" ]; then
  read -r -a urls <<<"$mirrors"
  export PIP_INDEX_URL=${urls[0]}
  export PIP_EXTRA_INDEX_URL="${urls[*]:1}"
fi
log "installing clients/python[test,lint] into a fresh venv"
"$python" -m venv "$work/venv"
cp -r clients/python "$work/package" # pip builds in the source folder: keep the checkout clean
"$work/venv/bin/pip" install -q --disable-pip-version-check "$work/package[test,lint]" >"$work/pip.log" 2>&1 ||
  { tail -n 30 "$work/pip.log" >&2; log "FAILED: pip install"; exit 1; }

# The package as installed ships its types (py.typed), which pass mypy --strict; ruff's lint
# and format check hold the sources to pyproject.toml's rules.
site=$("$work/venv/bin/python" -c 'import kiln_client, os; print(os.path.dirname(kiln_client.__file__))')
[ -f "$site/py.typed" ] || { log "FAILED: the installed package has no py.typed"; exit 1; }
(cd clients/python && "$work/venv/bin/mypy" --cache-dir "$work/mypy-cache" src &&
  "$work/venv/bin/ruff" check --no-cache src tests && "$work/venv/bin/ruff" format --no-cache --check src tests) >"$work/lint.log" 2>&1 ||
  { cat "$work/lint.log" >&2; log "FAILED: mypy or ruff on clients/python"; exit 1; }

# --- Kiln, on a database, Redis prefix, port and data folder of its own ---------------------
[ -d node_modules ] || kiln_ensure_deps
kiln_ensure_postgres >/dev/null
kiln_ensure_redis >/dev/null
CLI=dist/apps/api/src/admin-cli.js
if [ ! -f "$CLI" ] || [ ! -f dist/apps/api/src/main.js ] || [ ! -f dist/apps/generator/src/main.js ] ||
   [ -n "$(find apps libs package.json tsconfig.json tsconfig.build.json -newer dist/apps/api/src/main.js -print -quit)" ]; then
  log "building (npm run build)"
  npm run --silent build
fi
suffix=$(node -e 'console.log(require("crypto").randomBytes(4).toString("hex"))')
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
test_db=$(kiln_db_url "$DATABASE_URL" "kiln_python_$suffix")
kiln_pg_prepare "$test_db" 2>/dev/null
export DATABASE_URL=$test_db REDIS_PREFIX="kiln-python-$suffix" PORT=$port DATA_DIR="$work/data" \
  PUBLIC_BASE_URL="http://127.0.0.1:$port" WEBHOOK_ALLOW_PRIVATE=true \
  ADMIN_TOKEN=$(node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))') \
  WEBHOOK_SECRET_KEY=$(node -e 'console.log(require("crypto").randomBytes(32).toString("base64"))')
export WEBHOOK_RETRY_DELAYS_MS=${WEBHOOK_RETRY_DELAYS_MS:-500,1000} WEBHOOK_POLL_INTERVAL_MS=${WEBHOOK_POLL_INTERVAL_MS:-200}
node "$CLI" migrate >"$work/migrate.log" 2>&1 || { tail -n 20 "$work/migrate.log" >&2; log "FAILED: migrate"; exit 1; }

log "starting the api and a generator on port $port (database kiln_python_$suffix)"
node dist/apps/api/src/main.js >"$work/api.log" 2>&1 &
api_pid=$!
node dist/apps/generator/src/main.js >"$work/generator.log" 2>&1 &
generator_pid=$!
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  kill -0 "$api_pid" 2>/dev/null || break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { tail -n 40 "$work/api.log" >&2; log "FAILED: the api did not become ready"; exit 1; }

eval "$(node "$CLI" demo "python-$suffix@kiln.test" 1000 2>/dev/null)"
export KILN_URL="http://127.0.0.1:$port" KILN_API_KEY

log "pytest clients/python/tests"
status=0
(cd clients/python && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$@") || status=$?
# The README's Python example (its first python block, marked not run for the README test,
# which has no mirror), as a reader runs it: in a folder of its own, against this Kiln.
if [ "$status" -eq 0 ]; then
  log "the README's Python example (fox.py)"
  mkdir -p "$work/my-py-app"
  awk '/^```python$/ { inside = 1; next } inside && /^```$/ { exit } inside { print }' README.md >"$work/my-py-app/fox.py"
  [ -s "$work/my-py-app/fox.py" ] || { log "FAILED: README.md has no python block"; exit 1; }
  (cd "$work/my-py-app" && "$work/venv/bin/python" fox.py) >"$work/fox.log" 2>&1 ||
    { cat "$work/fox.log" >&2; log "FAILED: the README's Python example"; status=1; }
  pngs=$(find "$work/my-py-app/images" -maxdepth 1 -name 'kiln-*.png' 2>/dev/null | wc -l)
  [ "$status" -ne 0 ] || [ "$pngs" -eq 2 ] || { cat "$work/fox.log" >&2; log "FAILED: fox.py left $pngs images, not 2"; status=1; }
  [ "$status" -ne 0 ] || log "OK: fox.py made and downloaded its 2 images"
fi
if [ "$status" -ne 0 ]; then
  log "the api's last lines:"; tail -n 20 "$work/api.log" >&2
  log "the generator's last lines:"; tail -n 20 "$work/generator.log" >&2
fi
exit "$status"
