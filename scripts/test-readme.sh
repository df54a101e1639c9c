#!/usr/bin/env bash
# The README run as a reader runs it, on a fresh clone: npm ci, npm start (in the background),
# then EVERY fenced block of README.md in order, in one fresh shell (nothing of this script's
# environment but HOME and PATH), each as written: the shell blocks run, a block marked
# `<!-- file: NAME -->` is saved as NAME for the blocks after it, and a block marked
# `<!-- not run: reason -->` (the line before its fence) is skipped; the run lists every block
# it skipped and why. Then docs/providers.md's blocks the same way, in a fresh shell of their
# own. A failing command fails its block and the test: the shell runs with errexit, nounset and
# pipefail, and its curl answers an HTTP error (4xx/5xx) as a failure (--fail-with-body), the
# one thing added to the reader's shell. The README's port (localhost:8080) becomes this run's,
# and a route given by preset gets the `baseUrl` of its type's fake upstream
# (libs/testing/src/fakes, on 127.0.0.1; the generators hold a placeholder key for every type):
# the routing snippets run against the fakes, not the vendors. Then it checks what the blocks
# should have left: the exported key, the images, a batch done, the demo account's plan
# unchanged, the pairs docs/providers.md says its routes keep, an image made through the fake
# of every upstream type the doc routes to, a second demo saying it replaced the key, the
# development webhook secret and a loopback webhook's refusal.
# Part of CI (.ci/run, once, on the machine's Node), not of npm test (it builds and starts a
# whole Kiln of its own: 1 to 2 minutes with KILN_README_NODE_MODULES, a minute more with npm ci).
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
  if [ -n "${fakes_pid:-}" ]; then kill -TERM "$fakes_pid" 2>/dev/null || true; fi
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

# The generators hold a key for every upstream type, so routes to them are accepted: placeholders,
# since those routes go to the fake upstreams on 127.0.0.1 (which UPSTREAM_ALLOW_PRIVATE allows).
export OPENAI_API_KEY=readme-fake GEMINI_API_KEY=readme-fake FAL_KEY=readme-fake \
  REPLICATE_API_TOKEN=readme-fake BFL_API_KEY=readme-fake UPSTREAM_ALLOW_PRIVATE=true

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

# The fake upstreams (every type's fake of libs/testing/src/fakes, built with the rest, in a
# process of their own): the routing snippets' routes go to them instead of the vendors.
node dist/libs/testing/src/fakes/docs-upstreams.main.js "$work/fakes.json" >"$work/fakes.log" 2>&1 &
fakes_pid=$!
for _ in $(seq 1 100); do
  [ -s "$work/fakes.json" ] && break
  kill -0 "$fakes_pid" 2>/dev/null || { cat "$work/fakes.log" >&2; fail "the fake upstreams did not start"; }
  sleep 0.1
done
[ -s "$work/fakes.json" ] || fail "the fake upstreams did not start"

# A document's plan: every fenced block, in order, with its marker (the line before it), made
# into the reader's shell script for the blocks, which the run executes in a fresh shell.
# A route given by preset ("preset": "<type>/..." or "fromPreset") gets the "baseUrl" of its
# type's fake, the one change besides the port; routed.txt lists each, for the checks.
doc_reader() { # doc, reader script, state file (or '')
  node - "$1" "$2" "$3" "$port" "$work/fakes.json" "$work/skipped.txt" "$work/routed.txt" <<'NODE'
const fs = require('node:fs');
const [doc, script, stateFile, port, fakesFile, skippedFile, routedFile] = process.argv.slice(2);
const fakes = JSON.parse(fs.readFileSync(fakesFile, 'utf8')).baseUrls;
const lines = fs.readFileSync(doc, 'utf8').split('\n');
const blocks = [];
for (let i = 0; i < lines.length; i++) {
  const open = /^```(\S*)\s*$/.exec(lines[i]);
  if (!open) continue;
  const start = i;
  const body = [];
  for (i++; i < lines.length && !/^```\s*$/.test(lines[i]); i++) body.push(lines[i]);
  let j = start - 1;
  while (j >= 0 && lines[j].trim() === '') j--;
  const marker = j >= 0 ? /^<!--\s*(not run|file):\s*(.*?)\s*-->$/.exec(lines[j].trim()) : null;
  blocks.push({ line: start + 1, lang: open[1] || 'text', body: body.join('\n'), marker: marker && { kind: marker[1], value: marker[2] } });
}
const routed = [];
function toFakes(body, where) {
  const fake = (m, type, rewrite) => (fakes[type] ? (routed.push(`${where} ${type}`), rewrite(fakes[type])) : m);
  return body
    .replace(/"preset":(\s*)"([a-z]+)\//g, (m, sp, type) => fake(m, type, (url) => `"baseUrl":${sp}"${url}", ${m}`))
    .replace(/"fromPreset":(\s*)"(([a-z]+)\/[^"]+)"/g, (m, sp, id, type) =>
      fake(m, type, (url) => `"provider":${sp}{"preset":${sp}"${id}", "baseUrl":${sp}"${url}"}, ${m}`),
    );
}
const out = [
  'set -euo pipefail',
  '# The one addition to a reader\'s shell: an HTTP error answer fails the command (curl -s alone exits 0).',
  'curl() { command curl --fail-with-body "$@"; }',
];
const skipped = [];
let ran = 0;
for (const b of blocks) {
  const where = `${doc}:${b.line} (${b.lang})`;
  const body = toFakes(b.body.replaceAll('localhost:8080', `localhost:${port}`), `${doc}:${b.line}`);
  if (b.marker?.kind === 'not run') { skipped.push(`${where}: not run: ${b.marker.value}`); continue; }
  if (b.marker?.kind === 'file') {
    out.push(`printf '\\n[readme] %s: saved as %s\\n' ${JSON.stringify(where)} ${JSON.stringify(b.marker.value)} >&2`);
    out.push(`cat > ${JSON.stringify(b.marker.value)} <<'KILN_README_FILE'`, body, 'KILN_README_FILE');
    ran++;
    continue;
  }
  if (b.lang !== 'bash' && b.lang !== 'sh') { skipped.push(`${where}: not a shell block and not marked as a file`); continue; }
  out.push(`printf '\\n[readme] %s\\n' ${JSON.stringify(where)} >&2`, `echo ${JSON.stringify(where)} > "$KILN_README_CURRENT"`, body);
  ran++;
}
out.push('echo done > "$KILN_README_CURRENT"');
if (stateFile) {
  // What the blocks left, for the checks after them: the variables, and whether each was exported.
  out.push(`for v in KILN_API_KEY ACCOUNT_ID KILN_URL ADMIN_TOKEN ID ID2 KEY; do if [ -n "\${!v+x}" ]; then printf '%s=%q\\n' "$v" "\${!v}"; fi; done > ${JSON.stringify(stateFile)}`);
  out.push(`printf 'exported_KILN_API_KEY=%s\\n' "$(node -e 'console.log(process.env.KILN_API_KEY ? 1 : 0)')" >> ${JSON.stringify(stateFile)}`);
}
fs.writeFileSync(script, out.join('\n') + '\n');
fs.appendFileSync(skippedFile, skipped.map((s) => s + '\n').join(''));
fs.appendFileSync(routedFile, routed.map((s) => s + '\n').join(''));
console.log(ran);
NODE
}
# Runs a document's reader script in a fresh shell in the clone, as in another terminal: no
# DATABASE_URL (the CLI and demo find the database through .kiln/runtime.env), no ADMIN_TOKEN
# (the quick start reads .kiln/admin-token), no upstream key (those are the generators').
run_reader() { # doc, reader script
  if ! env -i HOME="$HOME" PATH="$PATH" LANG="${LANG:-C.UTF-8}" KILN_README_CURRENT="$work/current" \
      bash --noprofile --norc "$2" >"$work/blocks.log" 2>&1; then
    log "Kiln's last lines:"; tail -n 20 "$work/start.log" >&2
    log "the blocks' last lines:"; tail -n 40 "$work/blocks.log" >&2
    log "FAILED: the $1 block at $(cat "$work/current" 2>/dev/null || echo '?') failed"
    exit 1
  fi
  [ "$(cat "$work/current")" = done ] || fail "$1's blocks stopped at $(cat "$work/current")"
}

: >"$work/skipped.txt"
: >"$work/routed.txt"
ran=$(doc_reader README.md "$work/reader.sh" "$work/state.sh")
ran_providers=$(doc_reader docs/providers.md "$work/providers.sh" '')
log "blocks skipped:"; sed 's/^/  /' "$work/skipped.txt" >&2
log "routes given by preset, sent to the fake upstreams:"; sed 's/^/  /' "$work/routed.txt" >&2
log "running the README's other $ran blocks in order, in a fresh shell"
run_reader README.md "$work/reader.sh"
source "$work/state.sh"

# What the blocks should have left.
[[ "${KILN_API_KEY:-}" == kiln_live_* ]] || fail "the quick start left no KILN_API_KEY"
[ "${exported_KILN_API_KEY:-0}" = 1 ] || fail "KILN_API_KEY was set but not exported (npx kiln reads it from the environment)"
[[ "${ACCOUNT_ID:-}" =~ ^[0-9a-f-]{36}$ ]] || fail "ACCOUNT_ID was not set"
[ "$(find images -maxdepth 1 -name 'kiln-*.png' | wc -l)" -eq 3 ] || fail "kiln submit did not leave 3 images in images/"
[ "$(find ../my-app/images -maxdepth 1 -name 'kiln-*.png' | wc -l)" -eq 2 ] || fail "fox.mjs did not leave 2 images in ../my-app/images/"
H="Authorization: Bearer $KILN_API_KEY"
status=$(curl -sf "$KILN_URL/v1/batches/$ID" -H "$H" | jq -r .batch.status) || fail "GET /v1/batches/$ID"
[ "$status" = succeeded ] || fail "the README's batch ended $status"
[ "$(find . -maxdepth 1 -name 'kiln-*.zip' | wc -l)" -eq 1 ] || fail "the archive was not saved"
cancelled=$(curl -sf "$KILN_URL/v1/batches/$ID2" -H "$H" | jq -r .batch.counts.cancelled) || fail "GET /v1/batches/$ID2"
[ "$cancelled" -gt 0 ] || fail "the cancelled batch has no cancelled task"
[[ "${KEY:-}" == kiln_live_* ]] || fail "the dashboard block left KEY=${KEY:-}"
curl -sf "$KILN_URL/v1/me" -H "Authorization: Bearer $KEY" >/dev/null || fail "the dashboard key does not answer GET /v1/me"
demo_plan=$(curl -sf -H "Authorization: Bearer $ADMIN_TOKEN" "$KILN_URL/v1/admin/accounts/$ACCOUNT_ID" | jq -r .account.plan)
[ "$demo_plan" = studio ] || fail "the README's blocks changed the demo account's plan to $demo_plan"
# docs/providers.md's shell blocks, in a fresh shell of their own (its first block sets the
# names the others use), then what they should have left: the pairs its comments name, and
# every model they routed making an image through its upstream's fake.
log "running docs/providers.md's $ran_providers shell blocks in order, in a fresh shell"
run_reader docs/providers.md "$work/providers.sh"
A="Authorization: Bearer $ADMIN_TOKEN"
models=$(curl -sf "$KILN_URL/v1/admin/models" -H "$A") || fail "GET /v1/admin/models"
pairs_of() { jq -cS --arg k "$1" '.models[] | select(.key == $k) | .resolutionsByRatio' <<<"$models"; }
[ "$(pairs_of alpha-image-2)" = '{"1:1":["1K"],"2:3":["1K"],"3:2":["1K"]}' ] ||
  fail "docs/providers.md says alpha-image-2 keeps 1:1, 2:3, 3:2 at 1K; it has $(pairs_of alpha-image-2)"
[ "$(pairs_of beta-2 | jq length)" = 10 ] || fail "docs/providers.md says beta-2 keeps its ten ratios; it has $(pairs_of beta-2)"
routed_models=$(jq -r --slurpfile f "$work/fakes.json" \
  '.models[] | select(.provider.baseUrl as $b | $f[0].baseUrls | to_entries | any(.value == $b)) | "\(.key) \(.provider.type)"' <<<"$models")
doc_types=$(grep '^docs/providers.md:' "$work/routed.txt" | awk '{print $2}' | sort -u | xargs)
[ -n "$doc_types" ] || fail "docs/providers.md routes no model by preset"
[ "$(awk '{print $2}' <<<"$routed_models" | sort -u | xargs)" = "$doc_types" ] ||
  fail "docs/providers.md routes to $doc_types, but the models on the fakes are: $routed_models"
H="Authorization: Bearer $KILN_API_KEY"
batches=()
while read -r model type; do
  id=$(curl -sf -X POST "$KILN_URL/v1/batches" -H "$H" -H 'Content-Type: application/json' \
    -d "{\"prompts\":[\"a first image through $type\"],\"model\":\"$model\"}" | jq -r .id) || fail "a batch on $model ($type)"
  batches+=("$model:$id")
done <<<"$routed_models"
for entry in "${batches[@]}"; do
  model=${entry%%:*} id=${entry#*:}
  for _ in $(seq 1 120); do
    batch=$(curl -sf "$KILN_URL/v1/batches/$id" -H "$H") || fail "GET /v1/batches/$id"
    [ "$(jq -r .batch.done <<<"$batch")" = true ] && break
    sleep 0.5
  done
  [ "$(jq -r .batch.status <<<"$batch")" = succeeded ] ||
    fail "$model's batch through its fake upstream: $(jq -c '{status: .batch.status, errors: [.tasks[].error]}' <<<"$batch")"
done
kill -TERM "$fakes_pid" && wait "$fakes_pid" || true
fakes_pid=
for type in $doc_types; do
  [ "$(jq -r --arg t "$type" '.requests[$t] // 0' "$work/fakes.json")" -gt 0 ] || fail "the $type fake upstream was sent nothing"
done
log "OK: docs/providers.md routed $(wc -l <<<"$routed_models") models to the fake upstreams ($doc_types); each made its image there"

# demo again says that it replaced the key it made before.
node dist/apps/api/src/admin-cli.js demo >/dev/null 2>"$work/demo2.err" || fail "demo, a second time"
grep -q 'Revoked the earlier demo key' "$work/demo2.err" || fail "a second demo did not say it replaced the key: $(cat "$work/demo2.err")"
# npm start made a development WEBHOOK_SECRET_KEY: creating an endpoint is no 503, and a
# loopback URL's refusal names the setting that allows it (the webhooks block is not run).
[ -s .kiln/webhook-secret-key ] || fail "npm start made no .kiln/webhook-secret-key"
hook=$(curl -s -X POST "$KILN_URL/v1/webhooks" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"url":"http://127.0.0.1:9/hook"}')
[[ "$hook" == *WEBHOOK_ALLOW_PRIVATE* ]] || fail "a loopback webhook URL's refusal: $hook"
log "OK: $ran README blocks ran as written on a fresh clone ($(wc -l <"$work/skipped.txt") skipped, listed above)"
