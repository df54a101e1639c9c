#!/usr/bin/env bash
# Creates docker/.env (or the file given) from docker/.env.example with fresh random secrets. Run once before the
# first `docker compose up`; run again after an upgrade to add settings new in the example:
# values already in docker/.env are never changed, so the database and MinIO keep working.
set -euo pipefail
cd "$(dirname "$0")"
TARGET=${1:-.env}
umask 077

secret() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }

[ -f "$TARGET" ] || : >"$TARGET"
added=()
while IFS= read -r line; do
  case $line in
    '' | '#'*) continue ;;
  esac
  name=${line%%=*}
  value=${line#*=}
  grep -q "^${name}=" "$TARGET" && continue
  case $name in
    POSTGRES_PASSWORD | MINIO_ROOT_PASSWORD | MINIO_SECRET_KEY | ADMIN_TOKEN) [ -n "$value" ] || value=$(secret) ;;
    # AES-256 key of the webhook secrets at rest: the base64 of exactly 32 random bytes.
    WEBHOOK_SECRET_KEY) [ -n "$value" ] || value=$(head -c 32 /dev/urandom | base64) ;;
  esac
  printf "%s=%s\n" "$name" "$value" >>"$TARGET"
  added+=("$name")
done <.env.example

if [ ${#added[@]} -eq 0 ]; then
  echo "$TARGET: nothing to add (existing values kept)"
else
  echo "$TARGET: added ${added[*]}"
fi
echo "The admin token is ADMIN_TOKEN in docker/.env: grep ^ADMIN_TOKEN= docker/.env"
