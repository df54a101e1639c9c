#!/usr/bin/env bash
# npm run test:containers: builds the images from docker/Dockerfile, runs docker/compose.yaml
# for real and checks what an operator relies on (not part of npm test):
#   1. the stack comes up; an account and a key are made through the admin API;
#   2. a batch runs to done, its images download anonymously, the builtin text is real letters;
#      the generator process runs with --max-old-space-size=512 and the MALLOC_* settings;
#   3. with two generators, one is stopped mid-batch: it exits 0 within its grace period, the
#      batch finishes, no task runs twice but those the drain gave back when SHUTDOWN_GRACE_MS
#      ran out (it logs how many), the credits are exact;
#   4. every line the apps logged is JSON;
#   5. two api replicas start at once on a fresh database (both migrate, under the lock);
#   then everything is torn down, volumes included.
# With `--replicas N` (npm run test:containers -- --replicas 3), between 3 and 4:
#   3b. N api and N generator replicas, the api behind one port (a round-robin TCP proxy on
#      the host, as a Service would be); batches created through it; one api and one
#      generator SIGKILLed mid-run: every batch finishes, the money is exact (balance = sum of
#      the ledger; moved by exactly what the batches charged), no task ran twice except those
#      the killed generator held (at-least-once: they run again), every replica did work.
# Needs Docker with Compose v2 (`docker compose`), or KILN_COMPOSE set to another compose
# command (e.g. a wrapper around Compose v1). Host tools: curl, node (no node_modules needed:
# the images install their own).
set -euo pipefail
# Under pipefail a pipe fails when its reader exits before its writer is done (the writer dies
# of SIGPIPE, exit 141): `compose ps -q generator | head -1` did, with two generators. So every
# reader here reads its whole input (sed -n 1p, not head -1), and a check that stops at its
# first match (grep -q) reads a captured string, not a pipe.
cd "$(dirname "$0")/.."

say() { printf '[test-containers] %s\n' "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }

if [ -n "${KILN_COMPOSE:-}" ]; then
  read -r -a COMPOSE_CMD <<<"$KILN_COMPOSE"
elif docker compose version >/dev/null 2>&1; then
  COMPOSE_CMD=(docker compose)
else
  die "needs Docker Compose v2 (docker compose), or KILN_COMPOSE set to a compose command"
fi

REPLICAS=0
while [ $# -gt 0 ]; do
  case $1 in
    --replicas) REPLICAS=${2:-}; shift 2 || shift ;;
    --replicas=*) REPLICAS=${1#*=}; shift ;;
    *) die "unknown argument $1 (usage: test-containers.sh [--replicas N])" ;;
  esac
done
[[ $REPLICAS =~ ^[0-9]+$ ]] && { [ "$REPLICAS" = 0 ] || [ "$REPLICAS" -ge 2 ]; } || die "--replicas takes a number, 2 or more"

PROJECT=kilnsmoke
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-containers.XXXXXX")
ENV_FILE=$WORK/env
# One host port per api replica (compose gives each one of the range).
API_PORTS=${KILN_TEST_HTTP_PORTS:-127.0.0.1:18080-$((18080 + (REPLICAS > 2 ? REPLICAS : 2) - 1))}
LB_PORT=${KILN_TEST_LB_PORT:-18090}
LB_PID=
MINIO_PORT=${KILN_TEST_MINIO_PORT:-19000}
GRACE_S=45

bash docker/setup.sh "$ENV_FILE" >/dev/null
# Compose takes the last value of a variable: these override the example's.
{
  echo "KILN_HTTP_PORT=$API_PORTS"
  echo "KILN_MINIO_PORT=127.0.0.1:$MINIO_PORT"
  echo "MINIO_PUBLIC_URL=http://127.0.0.1:$MINIO_PORT/kiln"
  echo "KILN_VERSION=smoke"
  echo "KILN_REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
} >>"$ENV_FILE"
sed -i '/^MINIO_PUBLIC_URL=$/d; /^KILN_HTTP_PORT=127.0.0.1:8080$/d' "$ENV_FILE"
ADMIN_TOKEN=$(sed -n 's/^ADMIN_TOKEN=//p' "$ENV_FILE")

compose() { "${COMPOSE_CMD[@]}" -p "$PROJECT" --env-file "$ENV_FILE" -f docker/compose.yaml -f docker/compose.expose-minio.yaml "$@"; }
teardown() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    say "logs of the failed run:"
    compose logs --no-color --tail=40 >&2 2>/dev/null || true
  fi
  [ -z "$LB_PID" ] || kill "$LB_PID" 2>/dev/null || true
  say "tearing down"
  compose down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit "$status"
}
trap teardown EXIT

js() { node -e "$1" "${@:2}"; }
# field PATH: a field of the JSON on stdin (objects printed as JSON).
field() { js 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>{const v=process.argv[1].split(".").reduce((o,k)=>o?.[k],JSON.parse(s));console.log(typeof v==="object"?JSON.stringify(v):v)})' "$1"; }
api_url() { echo "http://$(compose port --index="${1:-1}" api 8080 | tail -1)"; }
wait_ready() { # URL SECONDS
  local i
  for ((i = 0; i < $2; i++)); do
    curl -fsS -m 3 "$1/readyz" >/dev/null 2>&1 && return 0
    sleep 1
  done
  return 1
}
psql_q() { compose exec -T postgres psql -U kiln -d kiln -tAc "$1"; }

t0=$SECONDS
say "building the images"
compose build >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; die "build failed"; }
say "built in $((SECONDS - t0)) s"

say "1. compose up, an account and a key"
t1=$SECONDS
# An S3 server without MinIO's admin API (a test stand-in) cannot have a user for Kiln: then
# only its root credentials open the bucket, and this run gives Kiln those.
compose up -d minio-setup >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "minio-setup did not start"; }
setup_id=$(compose ps -q minio-setup)
[ "$(docker wait "$setup_id")" = 0 ] || die "minio-setup failed: $(docker logs "$setup_id" 2>&1 | tail -5)"
setup_log=$(docker logs "$setup_id" 2>&1)
if grep -q 'no MinIO admin API' <<<"$setup_log"; then
  say "the object store has no MinIO admin API: Kiln uses its root credentials in this run"
  root_user=$(sed -n 's/^MINIO_ROOT_USER=//p' "$ENV_FILE")
  root_password=$(sed -n 's/^MINIO_ROOT_PASSWORD=//p' "$ENV_FILE")
  sed -i '/^MINIO_ACCESS_KEY=/d; /^MINIO_SECRET_KEY=/d' "$ENV_FILE"
  printf 'MINIO_ACCESS_KEY=%s\nMINIO_SECRET_KEY=%s\n' "$root_user" "$root_password" >>"$ENV_FILE"
fi
compose up -d >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "compose up failed"; }
API=$(api_url)
wait_ready "$API" 120 || die "the api at $API never became ready"
say "up and ready in $((SECONDS - t1)) s at $API"
[ "$(curl -fsS "$API/readyz" | field details.storage.status)" = up ] || die "/readyz does not report storage up"

admin() { curl -fsS -m 10 -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' "$@"; }
ACCOUNT=$(admin -X POST "$API/v1/admin/accounts" -d '{"email":"smoke@example.com","plan":"scale","credits":100000}' | field account.id)
KEY=$(admin -X POST "$API/v1/admin/accounts/$ACCOUNT/keys" -d '{"name":"smoke"}' | field secret)
[ -n "$KEY" ] && [ "$KEY" != undefined ] || die "no key"
balance() { curl -fsS -m 10 -H "Authorization: Bearer $KEY" "$API/v1/me" | field credits.balance; }
create_batch() { curl -fsS -m 30 -X POST "$API/v1/batches" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$1"; }
wait_done() { # ID SECONDS
  local i body
  for ((i = 0; i < $2; i++)); do
    body=$(curl -fsS -m 10 -H "Authorization: Bearer $KEY" "$API/v1/batches/$1") || true
    [ "$(printf '%s' "$body" | field batch.done 2>/dev/null)" = true ] && { printf '%s' "$body"; return 0; }
    sleep 1
  done
  return 1
}

say "2. a batch to done, its images anonymously"
B1=$(create_batch '{"prompts":["Kiln smoke test"],"model":"beta-2","aspectRatio":"1:1","countPerCombo":2}' | field id)
DONE=$(wait_done "$B1" 120) || die "batch $B1 did not finish"
[ "$(printf '%s' "$DONE" | field batch.status)" = succeeded ] || die "batch $B1: $(printf '%s' "$DONE" | field batch.counts)"
URLS=$(printf '%s' "$DONE" | js 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>{for(const t of JSON.parse(s).tasks)for(const u of t.resultUrls)console.log(u)})')
n=0
for url in $URLS; do
  curl -fsS -m 10 -o "$WORK/img.png" "$url" || die "anonymous GET $url failed"
  [ "$(od -An -tx1 -N4 "$WORK/img.png" | tr -d ' \n')" = 89504e47 ] || die "$url is not a PNG"
  n=$((n + 1))
done
[ "$n" -eq 2 ] || die "expected 2 result URLs, got $n"
# Through the library's entry point, as the generator imports it (@app/providers): a path to
# the file inside the library broke when the providers moved into folders of their own.
FONTS=$(compose exec -T generator node -e 'require("./dist/libs/providers/src").builtinFontRenders().then((r)=>console.log(JSON.stringify(r)))')
[ "$(printf '%s' "$FONTS" | field ok)" = true ] || die "the builtin renderer's text is tofu in the image: $FONTS"
say "2 images fetched anonymously; the text renders as letters ($FONTS)"
# The generator's memory settings (docker/Dockerfile, bench/findings.md) as the running
# process has them, not as the image's config says. compose's init (docker-init) is PID 1,
# so the process is the node one running the generator's script. The V8 flag only counts
# before the script (after it, it is an argument of the app); glibc reads the MALLOC_*
# variables from the environment the process started with.
GEN_PROC=$(compose exec -T generator node -e '
const fs = require("fs");
const found = [];
for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p) && +p !== process.pid)) {
  let argv, exe, env;
  try {
    argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    exe = fs.readlinkSync(`/proc/${pid}/exe`);
    env = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter((e) => e.startsWith("MALLOC_"));
  } catch { continue; } // gone meanwhile, or not ours to read
  const script = argv.indexOf("dist/apps/generator/src/main.js");
  if (script < 0 || !/\/node$/.test(exe)) continue; // not init, whose arguments hold the command too
  found.push({ pid: +pid, exe, v8: argv.slice(1, script), env });
}
console.log(JSON.stringify(found));')
js 'const f=JSON.parse(process.argv[1]);const p=f[0]||{};const want=["MALLOC_ARENA_MAX=2","MALLOC_MMAP_THRESHOLD_=131072"];
process.exit(f.length===1&&p.v8.includes("--max-old-space-size=512")&&want.every((w)=>p.env.includes(w))?0:1)' "$GEN_PROC" ||
  die "the generator does not run with --max-old-space-size=512, MALLOC_ARENA_MAX=2 and MALLOC_MMAP_THRESHOLD_=131072: $GEN_PROC"
say "the generator process runs with its memory settings: $GEN_PROC"

say "3. two generators, one stopped mid-batch"
compose up -d --no-recreate --scale generator=2 generator >/dev/null 2>&1
before=$(balance)
B2=$(create_batch '{"prompts":["stop test a","stop test b","stop test c","stop test d"],"model":"beta-2","aspectRatio":"16:9","resolution":"4K","countPerCombo":10}' | field id)
for _ in $(seq 1 60); do
  running=$(psql_q "SELECT count(*) FROM tasks WHERE batch_id = '$B2' AND status = 'running'")
  [ "$running" -ge 2 ] && break
  sleep 0.5
done
VICTIM=$(compose ps -q generator | sed -n 1p)
t2=$SECONDS
docker stop -t "$GRACE_S" "$VICTIM" >/dev/null
took=$((SECONDS - t2))
code=$(docker inspect -f '{{.State.ExitCode}}' "$VICTIM")
[ "$code" = 0 ] || die "the stopped generator exited $code"
[ "$took" -lt "$GRACE_S" ] || die "the stop took $took s, not under the $GRACE_S s grace period"
# The drain's own account: tasks finished, and those still running when SHUTDOWN_GRACE_MS
# (30 s) ran out, which it interrupts and gives back to the queue to run again (README,
# Operations). On a loaded two-core machine 40 4K renders can outlast the grace period.
docker logs "$VICTIM" >"$WORK/victim.log" 2>&1
DRAINED=$(js 'for(const l of require("fs").readFileSync(process.argv[1],"utf8").split("\n")){let o;try{o=JSON.parse(l)}catch{continue}
const m=/^Drained: (\d+) task\(s\) finished, (\d+) given back/.exec(o.msg||"");if(m){console.log(m[1]+" "+m[2]);process.exit(0)}}process.exit(1)' "$WORK/victim.log") ||
  die "the stopped generator logged no 'Drained:' line: it did not drain on SIGTERM"
read -r drained_finished given_back <<<"$DRAINED"
say "a generator stopped in $took s ($running tasks were running), exit 0; it drained $drained_finished and gave back $given_back"
DONE=$(wait_done "$B2" 900) || die "batch $B2 did not finish"
[ "$(printf '%s' "$DONE" | field batch.status)" = succeeded ] || die "batch $B2: $(printf '%s' "$DONE" | field batch.counts)"
twice=$(psql_q "SELECT count(*) FROM tasks WHERE batch_id = '$B2' AND attempts <> 1")
# Only the tasks given back may run again; with none given back, every task ran once.
[ "$twice" -le "$given_back" ] || die "$twice tasks of batch $B2 ran more than once; the stopped generator gave back $given_back"
after=$(balance)
charged=$(printf '%s' "$DONE" | field batch.creditsCharged)
[ $((before - after)) -eq "$charged" ] || die "the balance moved by $((before - after)), the batch charged $charged"
if [ "$given_back" = 0 ]; then
  say "a batch of 40 4K images done, every task ran once, $charged credits exact"
else
  say "a batch of 40 4K images done; $twice tasks ran again, of the $given_back given back when the grace period ran out; $charged credits exact"
fi

if [ "$REPLICAS" -ge 2 ]; then
  say "3b. $REPLICAS api and $REPLICAS generator replicas behind one port, one of each killed mid-run"
  compose up -d --no-recreate --scale api="$REPLICAS" --scale generator="$REPLICAS" api generator >"$WORK/up.log" 2>&1 ||
    { cat "$WORK/up.log" >&2; die "scaling to $REPLICAS replicas failed"; }
  BACKENDS=()
  for i in $(seq 1 "$REPLICAS"); do
    url=$(api_url "$i")
    wait_ready "$url" 120 || die "api replica $i ($url) never became ready"
    BACKENDS+=("${url#http://}")
  done
  mapfile -t API_IDS < <(compose ps -q api)
  mapfile -t GEN_IDS < <(compose ps -q generator)
  [ "${#API_IDS[@]}" = "$REPLICAS" ] && [ "${#GEN_IDS[@]}" = "$REPLICAS" ] || die "expected $REPLICAS api and generator containers, got ${#API_IDS[@]} and ${#GEN_IDS[@]}"
  # The one port: each connection to the next replica in turn; a replica that refuses is skipped.
  cat >"$WORK/lb.js" <<'JS'
const net = require('node:net');
const [port, ...backends] = process.argv.slice(2);
let next = 0;
net.createServer((client) => {
  client.pause();
  const attempt = (tries) => {
    const [host, p] = backends[next++ % backends.length].split(':');
    const upstream = net.connect(+p, host);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.pipe(upstream).pipe(client);
      client.resume();
    });
    // Refused before connecting: the next replica. Broken after: the client sees it, as behind a Service.
    upstream.on('error', () => (!connected && tries > 1 ? attempt(tries - 1) : client.destroy()));
    upstream.once('close', () => connected && client.destroy());
    client.once('close', () => upstream.destroy());
  };
  client.on('error', () => undefined);
  attempt(backends.length);
}).listen(+port, '127.0.0.1');
JS
  node "$WORK/lb.js" "$LB_PORT" "${BACKENDS[@]}" &
  LB_PID=$!
  API_ONE=http://127.0.0.1:$LB_PORT
  wait_ready "$API_ONE" 20 || die "the proxy on $API_ONE does not answer"
  since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  before=$(curl -fsS -m 10 -H "Authorization: Bearer $KEY" "$API_ONE/v1/me" | field credits.balance)
  BATCHES=()
  for b in 1 2 3; do
    BATCHES+=("$(curl -fsS -m 30 -X POST "$API_ONE/v1/batches" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
      -d "{\"prompts\":[\"replicas $b a\",\"replicas $b b\",\"replicas $b c\",\"replicas $b d\"],\"model\":\"beta-2\",\"aspectRatio\":\"16:9\",\"resolution\":\"4K\",\"countPerCombo\":10}" | field id)")
  done
  for id in "${BATCHES[@]}"; do [[ $id =~ ^[0-9a-f-]{36}$ ]] || die "a batch was not created through $API_ONE ($id)"; done
  in_list=$(printf "'%s'," "${BATCHES[@]}"); in_list=${in_list%,}
  for _ in $(seq 1 120); do
    running=$(psql_q "SELECT count(*) FROM tasks WHERE batch_id IN ($in_list) AND status = 'running'")
    done_n=$(psql_q "SELECT count(*) FROM tasks WHERE batch_id IN ($in_list) AND status = 'succeeded'")
    # Mid-run: some done, some held by the generators.
    [ "$running" -ge 1 ] && [ "$done_n" -ge 10 ] && break
    sleep 0.5
  done
  KILLED_API=${API_IDS[0]}
  KILLED_GEN=${GEN_IDS[0]}
  held=$(psql_q "SELECT count(*) FROM tasks WHERE batch_id IN ($in_list) AND status = 'running'")
  docker kill "$KILLED_API" "$KILLED_GEN" >/dev/null
  say "SIGKILLed api ${KILLED_API:0:12} and generator ${KILLED_GEN:0:12} with $done_n tasks done and $held running"
  # Polls through the one port go on while a replica is dead (a poll that breaks is retried).
  for id in "${BATCHES[@]}"; do
    for i in $(seq 1 900); do
      body=$(curl -fsS -m 10 -H "Authorization: Bearer $KEY" "$API_ONE/v1/batches/$id") || body=
      [ "$(printf '%s' "$body" | field batch.done 2>/dev/null)" = true ] && break
      [ "$i" -lt 900 ] || die "batch $id did not finish after the kills"
      sleep 1
    done
    [ "$(printf '%s' "$body" | field batch.status)" = succeeded ] || die "batch $id: $(printf '%s' "$body" | field batch.counts)"
  done
  after=$(curl -fsS -m 10 -H "Authorization: Bearer $KEY" "$API_ONE/v1/me" | field credits.balance)
  charged=$(psql_q "SELECT sum(credits_charged - credits_refunded) FROM batches WHERE id IN ($in_list)")
  [ $((before - after)) -eq "$charged" ] || die "the balance moved by $((before - after)), the batches charged $charged"
  drift=$(psql_q "SELECT a.balance - coalesce((SELECT sum(amount) FROM ledger_entries l WHERE l.account_id = a.id), 0) FROM accounts a WHERE a.id = '$ACCOUNT'")
  [ "$drift" = 0 ] || die "the balance differs from the sum of the ledger by $drift"
  # At least once: only the tasks running when the generator died may have run again.
  again=$(psql_q "SELECT count(*) FROM tasks WHERE batch_id IN ($in_list) AND attempts > 1")
  [ "$again" -le "$held" ] || die "$again tasks ran more than once; only the $held running at the kill may"
  # Each task finished once: one 'Task succeeded' line across every generator's log.
  for id in "${GEN_IDS[@]}"; do docker logs --since "$since" "$id" 2>&1; done >"$WORK/gen.log"
  finished=$(js 'const n=new Map();for(const l of require("fs").readFileSync(process.argv[1],"utf8").split("\n")){try{const o=JSON.parse(l);if(o.msg==="Task succeeded")n.set(o.taskId,(n.get(o.taskId)||0)+1)}catch{}}const twice=[...n.values()].filter((c)=>c>1).length;console.log(n.size+" "+twice)' "$WORK/gen.log")
  read -r finished_n finished_twice <<<"$finished"
  [ "$finished_n" = 120 ] && [ "$finished_twice" = 0 ] || die "generators logged $finished_n tasks succeeded ($finished_twice more than once), not 120 once each"
  # Every replica did work: requests logged by each api, tasks finished by each generator.
  work=()
  for id in "${API_IDS[@]}"; do
    n=$(docker logs --since "$since" "$id" 2>&1 | js 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(s.split("\n").filter((l)=>l.includes("\"req\"")).length))')
    [ "$n" -gt 0 ] || die "api replica ${id:0:12} served no request"
    work+=("api ${id:0:12}: $n requests")
  done
  for id in "${GEN_IDS[@]}"; do
    n=$(docker logs --since "$since" "$id" 2>&1 | js 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(s.split("\n").filter((l)=>l.includes("\"Task succeeded\"")).length))')
    [ "$n" -gt 0 ] || die "generator replica ${id:0:12} finished no task"
    work+=("generator ${id:0:12}: $n tasks")
  done
  say "3 batches of 40 4K images done through one port; $charged credits exact, ledger = balance; $again of $held held tasks ran again"
  say "work per replica (the first of each was killed): $(printf '%s; ' "${work[@]}")"
  say "the killed ones afterwards (restart policy unless-stopped): $(docker inspect -f '{{.Name}} running={{.State.Running}} restarts={{.RestartCount}}' "$KILLED_API" "$KILLED_GEN" | tr '\n' ' ')"
  kill "$LB_PID" 2>/dev/null || true
  LB_PID=
fi

say "4. every log line is JSON"
for id in $(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT"); do
  name=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}}' "$id")
  case $name in api | generator | migrate) ;; *) continue ;; esac
  docker logs "$id" >"$WORK/log" 2>&1
  js 'const lines=require("fs").readFileSync(process.argv[1],"utf8").split("\n").filter(Boolean);const bad=lines.filter((l)=>{try{return typeof JSON.parse(l)!=="object"}catch{return true}});if(bad.length){console.error(bad.slice(0,5).join("\n"));process.exit(1)}' "$WORK/log" \
    || die "$name ($id) logged lines that are not JSON"
done

say "5. two api replicas on a fresh database at once"
compose down -v >/dev/null 2>&1
compose up -d postgres redis minio minio-setup >/dev/null 2>&1
for _ in $(seq 1 60); do psql_q 'SELECT 1' >/dev/null 2>&1 && break; sleep 1; done
# --no-deps: no migrate service first, so both replicas migrate the empty database themselves.
compose up -d --no-deps --scale api=2 api >/dev/null 2>&1
wait_ready "$(api_url 1)" 120 || die "api replica 1 never became ready"
wait_ready "$(api_url 2)" 120 || die "api replica 2 never became ready"
dupes=$(psql_q 'SELECT count(*) - count(DISTINCT name) FROM migrations')
[ "$dupes" = 0 ] || die "$dupes migrations applied twice"
restarts=0
for id in $(compose ps -q api); do restarts=$((restarts + $(docker inspect -f '{{.RestartCount}}' "$id"))); done
[ "$restarts" = 0 ] || die "api replicas restarted $restarts times"
say "both replicas ready (no restart), $(psql_q 'SELECT count(*) FROM migrations') migrations each applied once"

say "PASS in $((SECONDS - t0)) s"
