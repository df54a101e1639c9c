#!/bin/sh
# compose's minio-setup service: Kiln's own MinIO user (MINIO_ACCESS_KEY/MINIO_SECRET_KEY in
# docker/.env), allowed everything on Kiln's bucket and nothing else, so Kiln never holds the
# root credentials. Every step is idempotent: it runs on each `docker compose up`.
set -eu
log() { printf '{"level":%s,"time":%s000,"context":"MinioSetup","msg":"%s"}\n' "$1" "$(date +%s)" "$2"; }

mc ready root >/dev/null
if ! mc --json admin info root >/dev/null 2>&1; then
  # S3 servers other than MinIO (and test stand-ins) have no users to create; Kiln then uses
  # the credentials in docker/.env as that server defines them.
  log 40 "the object store at minio:9000 has no MinIO admin API: no user created for Kiln"
  exit 0
fi
mc --json mb --ignore-existing "root/$KILN_BUCKET" >/dev/null
cat >/tmp/kiln-policy.json <<POLICY
{
  "Version": "2012-10-17",
  "Statement": [
    {
      "Effect": "Allow",
      "Action": ["s3:*"],
      "Resource": ["arn:aws:s3:::$KILN_BUCKET", "arn:aws:s3:::$KILN_BUCKET/*"]
    }
  ]
}
POLICY
mc --json admin policy create root kiln-bucket /tmp/kiln-policy.json >/dev/null
mc --json admin user add root "$KILN_ACCESS_KEY" "$KILN_SECRET_KEY" >/dev/null
# Attaching an attached policy is an error to mc; the user's policies are listed first.
if ! mc --json admin user info root "$KILN_ACCESS_KEY" | grep -q '"kiln-bucket"'; then
  mc --json admin policy attach root kiln-bucket --user "$KILN_ACCESS_KEY" >/dev/null
fi
log 30 "MinIO user $KILN_ACCESS_KEY may use bucket $KILN_BUCKET"
