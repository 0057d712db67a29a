#!/usr/bin/env bash
# Where Kelp's broker CPU goes under kafka-producer-perf-test: records the broker with Linux
# `perf` (DWARF call graphs) while Apache Kafka's ProducerPerformance runs against it, then
# draws a flame graph with inferno and prints the hottest functions.
#
#   perf/flamegraph.sh [STORAGE] [ACKS] [PARTITIONS]     defaults: local all 1
#
# Output: perf/results/flamegraph-STORAGE-acksACKS-pPARTITIONS.svg (+ .top.txt, the top
# self-time symbols). Environment: RECORDS (300000), RECORD_SIZE (1024), PORT (39600),
# KELP_BIN, KELP_CORES (0-1), FREQ (499 Hz), CLIENT (java; rdkafka: librdkafka's
# rdkafka_performance from perf/rdkafka.sh, which leaves the cores to the broker).
# Needs `perf` (apt: linux-perf) and installs
# inferno (crates.io) into ${KELP_CACHE:-~/.cache/kelp}/inferno on first use.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
JARS="$CACHE/jars/kafka"
STORAGE="${1:-local}" ACKS="${2:-all}" PARTS="${3:-1}"
RECORDS="${RECORDS:-300000}" SIZE="${RECORD_SIZE:-1024}" PORT="${PORT:-39600}" FREQ="${FREQ:-499}"
KELP_BIN="${KELP_BIN:-$ROOT/target/release/kelp}"
WORK="$HERE/work/flame"
CLIENT="${CLIENT:-java}"
OUT="$HERE/results/flamegraph-$STORAGE-acks$ACKS-p$PARTS$([[ $CLIENT == java ]] || echo "-$CLIENT")"
log() { printf '[flamegraph %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

command -v perf >/dev/null || { log "no perf: apt-get install linux-perf"; exit 1; }
"$HERE/install.sh" >&2
INFERNO="$CACHE/inferno/bin"
if [[ ! -x "$INFERNO/inferno-flamegraph" ]]; then
  log "installing inferno 0.12.8 into $CACHE/inferno"
  cargo install --quiet --locked inferno --version 0.12.8 --root "$CACHE/inferno" >&2
fi
[[ -x "$KELP_BIN" ]] || (cd "$ROOT" && cargo build --release)

tool() { java -Xmx1g "-Dlog4j2.configurationFile=$CACHE/jars/kafka-log4j2-tools.xml" -cp "$JARS/*" "$@"; }
rm -rf "$WORK"; mkdir -p "$WORK" "$(dirname "$OUT")"
ulimit -l unlimited 2>/dev/null || true
# shellcheck source=kelp_proc.sh
. "$HERE/kelp_proc.sh"
kelp_start "$WORK" "$PORT" --storage "$STORAGE" --cache-bytes-per-core 2147483648
tool org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$PORT" --create --topic flame \
  --partitions "$PARTS" --replication-factor 1 >/dev/null

log "recording kelp (pid $KELP_PID, --storage $STORAGE) during a $CLIENT producer, acks=$ACKS, $PARTS partition(s), $RECORDS x $SIZE B"
perf record -q -F "$FREQ" --call-graph dwarf,16384 -p "$KELP_PID" -o "$WORK/perf.data" 2>/dev/null &
PERF_PID=$!
sleep 0.5
if [[ $CLIENT == rdkafka ]]; then
  "$("$HERE/rdkafka.sh")" -P -t flame -b "127.0.0.1:$PORT" -s "$SIZE" -c "$RECORDS" \
    -a "$([[ $ACKS == all ]] && echo -1 || echo "$ACKS")" -X linger.ms=5 -X batch.size=131072 \
    -X queue.buffering.max.messages=1000000 2>&1 | grep -E '^% [0-9]+ messages produced' | tail -1
else
  tool org.apache.kafka.tools.ProducerPerformance --topic flame --num-records "$RECORDS" \
    --record-size "$SIZE" --throughput -1 --producer-props "bootstrap.servers=127.0.0.1:$PORT" \
    "acks=$ACKS" linger.ms=5 batch.size=131072 | tail -1
fi
kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true; PERF_PID=
kelp_stop; trap - EXIT

perf script -i "$WORK/perf.data" 2>/dev/null | "$INFERNO/inferno-collapse-perf" > "$WORK/folded.txt"
"$INFERNO/inferno-flamegraph" --title "kelp --storage $STORAGE, acks=$ACKS, $PARTS partition(s)" \
  < "$WORK/folded.txt" > "$OUT.svg"
perf report -i "$WORK/perf.data" --no-children --sort comm,dso,sym -g none --percent-limit 1 2>/dev/null \
  | grep -v '^#' | grep -v '^$' | head -30 > "$OUT.top.txt"
log "wrote $OUT.svg and $OUT.top.txt"
cat "$OUT.top.txt"
rm -rf "$WORK"
