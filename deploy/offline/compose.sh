#!/usr/bin/env bash
# docker-compose for a host without a registry or bridge networking (see docker-compose.offline.yml):
#   deploy/offline/make-base-images.sh      # once: base images from Debian and PyPI
#   deploy/offline/compose.sh up -d         # any docker-compose arguments
# Writes the merged file (the offline override applied, published ports removed) next to this
# script as docker-compose.merged.yml (mode 0600) and runs docker-compose on it, project name
# `spielbus`. Writes deploy/grafana.env with a random admin password when there is none.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/deploy/offline"
COMPOSE=${COMPOSE:-docker-compose}
MERGED="$HERE/docker-compose.merged.yml"
cd "$ROOT"
# The merged file holds deploy/grafana.env's password (docker-compose config inlines env files).
umask 077
if [ ! -e deploy/grafana.env ]; then
  # An unattended host: a random Grafana admin password instead of the refused default.
  printf 'GF_SECURITY_ADMIN_PASSWORD=%s\n' "$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')" \
    >deploy/grafana.env
  echo "compose.sh: wrote deploy/grafana.env (a random Grafana admin password; read it there)" >&2
fi
$COMPOSE --env-file "$HERE/offline.env" -f docker-compose.yml -f "$HERE/docker-compose.offline.yml" config \
  | python3 -c '
import sys, yaml
doc = yaml.safe_load(sys.stdin)
for service in doc["services"].values():
    service.pop("ports", None)
yaml.safe_dump(doc, sys.stdout, sort_keys=False)' >"$MERGED"
exec $COMPOSE -p "${COMPOSE_PROJECT_NAME:-spielbus}" --project-directory "$ROOT" -f "$MERGED" "$@"
