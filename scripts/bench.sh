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

# Kiln's processes and the baselines run on the Node the container images deploy (the
# machine's own when it is that major; KILN_BENCH_MACHINE_NODE=1 keeps the machine's).
source scripts/image-node.sh
node_bin=
[ -n "${KILN_BENCH_MACHINE_NODE:-}" ] || node_bin=$(kiln_image_node_bin)
kiln_log "running on Node $("${node_bin:+$node_bin/}node" -v)"
exec "${node_bin:+$node_bin/}node" dist/bench/run.js "$@"
