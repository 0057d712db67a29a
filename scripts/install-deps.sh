#!/usr/bin/env bash
# Installs what the test suite needs, each step skipped when already done:
#   - Debian's kcat (librdkafka 2.0.2: the old, strict ApiVersions client the tests keep);
#   - Python clients: confluent-kafka (librdkafka), kafka-python with its codec packages, pytest;
#   - the Java client kafka-clients 4.x and its runtime jars (Maven Central, cached in ~/.m2);
#   - kafkajs (npm ci from tests/node/package-lock.json) and franz-go modules (Go proxy).
# Caches live under ${KELP_CACHE:-$HOME/.cache/kelp}.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
mkdir -p "$CACHE"
log() { echo "install-deps: $*"; }

if ! command -v kcat >/dev/null 2>&1; then
  log "apt: kcat"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

PY_PKGS=(confluent-kafka==2.16.1 kafka-python==3.0.12 pytest lz4 zstandard python-snappy prometheus-client)
if ! python3 -c "import confluent_kafka, kafka, pytest, lz4, zstandard, snappy, prometheus_client" 2>/dev/null; then
  log "pip: ${PY_PKGS[*]}"
  python3 -m pip install -q --disable-pip-version-check "${PY_PKGS[@]}"
fi

JARS="$CACHE/jars/clients"
if ! ls "$JARS"/kafka-clients-4*.jar >/dev/null 2>&1; then
  log "maven: kafka-clients -> $JARS"
  mkdir -p "$JARS"
  mvn -q -B -f scripts/maven/clients-pom.xml dependency:copy-dependencies \
    -DoutputDirectory="$JARS" -DincludeScope=runtime
fi

if command -v npm >/dev/null 2>&1 && [ ! -d tests/node/node_modules/kafkajs ]; then
  log "npm: kafkajs (tests/node)"
  (cd tests/node && npm ci --no-audit --no-fund --silent)
fi

if command -v go >/dev/null 2>&1; then
  log "go: franz-go modules (tests/go)"
  (cd tests/go && GOMODCACHE="$CACHE/gomod" GOFLAGS=-mod=mod go mod download)
fi
log "done"
