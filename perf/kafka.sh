#!/usr/bin/env bash
# Apache Kafka for the perf comparison, with the perf settings, started by the project's one
# Kafka script (scripts/kafka.sh: KRaft single node, jars from scripts/install-deps.sh or
# perf/install.sh):
#   perf/kafka.sh start PORT DIR   fresh run dir DIR (config, data, kafka.pid); waits until served
#   perf/kafka.sh stop  PORT DIR   stop the JVM by the PID in DIR/kafka.pid
# Heap: KAFKA_HEAP (default -Xmx1g -Xms1g), the same for every run. KAFKA_TLS_CONFIG: more
# server.properties lines (perf/run.sh's kafka-tls target: its SSL listener).
set -euo pipefail
cmd="${1:-}"; PORT="${2:-}"; DIR="${3:-}"
if [[ -z "$cmd" || -z "$PORT" || -z "$DIR" ]]; then
  echo "usage: $0 start|stop PORT DIR" >&2; exit 2
fi
export KAFKA_RUN_DIR="$DIR"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP:--Xmx1g -Xms1g}"
# Same settings as the earlier published runs: no group join delay, default thread counts.
export KAFKA_EXTRA_CONFIG=$'num.network.threads=3\nnum.io.threads=8\ngroup.initial.rebalance.delay.ms=0\nlog.retention.hours=1'"${KAFKA_TLS_CONFIG:-}"
case "$cmd" in
  start) [[ -d "$DIR" ]] && rm -rf "$DIR"; exec "$(dirname "$0")/../scripts/kafka.sh" start "$PORT" ;;
  stop) exec "$(dirname "$0")/../scripts/kafka.sh" stop "$PORT" ;;
  *) echo "usage: $0 start|stop PORT DIR" >&2; exit 2 ;;
esac
