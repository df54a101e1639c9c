#!/usr/bin/env bash
# Sourced by .ci/run and scripts/bench.sh: the Node major of the container images
# (docker/Dockerfile's base), and that Node itself when the machine's differs. It is the npm
# package node-linux-<arch>@<major>, cached under .kiln/. The native parts of node_modules
# (sharp, msgpackr-extract) are N-API builds, so one install serves both Nodes.

# Prints the Dockerfile's Node major.
kiln_image_node_major() {
  local major
  major=$(sed -n 's/^FROM node:\([0-9][0-9]*\)-.*/\1/p' docker/Dockerfile | head -1)
  [ -n "$major" ] || { echo "no node:<major> base image in docker/Dockerfile" >&2; return 1; }
  echo "$major"
}

# Prints the directory holding that Node's `node` binary, fetching it on first use; prints
# nothing when the machine's Node already is that major.
kiln_image_node_bin() {
  local major arch prefix bin
  major=$(kiln_image_node_major) || return 1
  [ "$(node -p 'process.versions.node.split(".")[0]')" != "$major" ] || return 0
  case $(uname -m) in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) echo "no node-linux package for $(uname -m)" >&2; return 1 ;;
  esac
  prefix=.kiln/node$major
  bin=$prefix/node_modules/node-linux-$arch/bin
  if [ ! -x "$bin/node" ] || [ "$("$bin/node" -p 'process.versions.node.split(".")[0]')" != "$major" ]; then
    echo "fetching Node $major (node-linux-$arch@$major) into $prefix" >&2
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --ignore-scripts "node-linux-$arch@$major" >&2 || return 1
  fi
  echo "$PWD/$bin"
}
