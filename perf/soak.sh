#!/usr/bin/env bash
# Soak Kelp under mixed real-client load (perf/soak.py) for SECONDS (default 360), on all
# cores unless SOAK_CORES is set; fails on a crash or on memory above the documented model.
#   perf/soak.sh 3600                      # an hour
#   SOAK_OUT=perf/results/soak-1h perf/soak.sh 3600
# Needs the release binary (KELP_BIN, default target/release/kelp) and the clients that
# scripts/install-deps.sh installs (Kafka's jars, confluent-kafka).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_ARG="${1:-360}"
args=(--seconds "$SECONDS_ARG")
[ -n "${SOAK_CORES:-}" ] && args+=(--cores "$SOAK_CORES")
[ -n "${SOAK_OUT:-}" ] && args+=(--out "$SOAK_OUT")
[ -n "${SOAK_RATE:-}" ] && args+=(--rate "$SOAK_RATE")
exec python3 perf/soak.py "${args[@]}"
