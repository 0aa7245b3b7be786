#!/usr/bin/env bash
# Generates the docker compose stack's secrets once: .env at the repository root and the
# bearer-token key pair under deploy/secrets/ (both git-ignored). Refuses to overwrite.
#
# Each service gets its own forwarded-identity key, derived from the gateway's
# IDENTITY_SIGNING_KEY exactly as `platformctl identity-key --service NAME` derives it:
# base64(HMAC-SHA256(gateway key, "analytics-platform forwarded identity v1" NUL NAME)).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
env_file="${ENV_FILE:-$root/.env}"
secrets="${SECRETS_DIR:-$root/deploy/secrets}"
if [[ -e "$env_file" ]]; then
  echo "gen-env: $env_file exists; remove it to generate new secrets" >&2
  exit 1
fi
mkdir -p "$secrets"
if [[ ! -e "$secrets/jwt-private.pem" ]]; then
  openssl genpkey -algorithm ed25519 -out "$secrets/jwt-private.pem"
  openssl pkey -in "$secrets/jwt-private.pem" -pubout -out "$secrets/jwt-public.pem"
fi
# The gateway's own key for service accounts' access tokens (OAUTH_SIGNING_KEY_FILE).
if [[ ! -e "$secrets/oauth-signing.pem" ]]; then
  openssl genpkey -algorithm ed25519 -out "$secrets/oauth-signing.pem"
fi
identity_key="$(openssl rand -base64 32)"
hexkey="$(printf %s "$identity_key" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
service_key() {
  printf 'svc:%s:%s' "$1" "$(printf 'analytics-platform forwarded identity v1\0%s' "$1" |
    openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64)"
}
umask 077
{
  echo "IDENTITY_SIGNING_KEY=$identity_key"
  echo "IDENTITY_KEY_WORKSPACE_SVC=$(service_key workspace-svc)"
  echo "IDENTITY_KEY_EMBED_SVC=$(service_key embed-svc)"
  echo "IDENTITY_KEY_DBTSYNC_SVC=$(service_key dbtsync-svc)"
  echo "DBT_CREDENTIALS_KEY=$(openssl rand -base64 32)"
  echo "EMBED_KEY_ENCRYPTION_KEY=$(openssl rand -base64 32)"
  # One NATS user per process (deploy/nats/platform-users.conf).
  for u in GATEWAY WORKSPACE EMBED DBTSYNC DBTSYNC_WORKER PLATFORMCTL; do
    echo "NATS_${u}_PASSWORD=$(openssl rand -hex 24)"
  done
  # Redis's password (the gateway's and embed-svc's REDIS_URL; the worker gets none).
  echo "REDIS_PASSWORD=$(openssl rand -hex 24)"
  echo "GRAFANA_ADMIN_PASSWORD=$(openssl rand -hex 16)"
  for u in ROOT GATEWAY WORKSPACE EMBED DBTSYNC; do
    echo "MONGO_${u}_PASSWORD=$(openssl rand -hex 24)"
  done
} > "$env_file"
echo "gen-env: wrote $env_file, $secrets/jwt-{private,public}.pem and $secrets/oauth-signing.pem"
