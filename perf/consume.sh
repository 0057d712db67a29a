#!/usr/bin/env bash
# Broker CPU per GB of a consumer reading from the batch cache: a fresh Kelp (local storage,
# a cache big enough for everything) gets 1M x 1 KiB from librdkafka's rdkafka_performance
# (perf/rdkafka.sh) into 4 partitions, then one rdkafka_performance consumer reads them all
# back from the beginning; the broker's utime+stime during the read, per GB read.
#
#   perf/consume.sh [OUT_DIR] [none|perf|dwarf|faults|count]
#
# The modes are steady.sh's, over the read: `dwarf` records it with Linux perf (DWARF call
# graphs, FREQ samples per second, 499) into OUT_DIR/perf.data and draws OUT_DIR/flame.svg
# when inferno is installed (perf/flamegraph.sh installs it); `count` prints syscalls and
# context switches per GB read, from `perf stat`.
#
# Environment: KELP_BIN (target/release/kelp), KELP_CORES (0-1), PORT (39660), RECORDS
# (1,000,000), KELP_ARGS (more broker flags, e.g. "--advertise-shards").
# Needs kafka-python (scripts/install-deps.sh) to create the topic.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="${1:-$HERE/work/consume}" MODE="${2:-none}"
KELP_BIN="${KELP_BIN:-$ROOT/target/release/kelp}" PORT="${PORT:-39660}"
RECORDS="${RECORDS:-1000000}"
RDK="$("$HERE/rdkafka.sh")"
rm -rf "$OUT"; mkdir -p "$OUT"
# shellcheck source=kelp_proc.sh
. "$HERE/kelp_proc.sh"
# shellcheck disable=SC2086 # KELP_ARGS is a list of flags
kelp_start "$OUT" "$PORT" --storage local --cache-bytes-per-core 1073741824 ${KELP_ARGS:-}
kelp_create_topic "$PORT" consume 4
"$RDK" -P -t consume -b "127.0.0.1:$PORT" -s 1024 -c "$RECORDS" -a 1 -X linger.ms=5 \
  -X batch.size=131072 -X queue.buffering.max.messages=1000000 -X message.timeout.ms=60000 \
  > "$OUT/produce.out" 2>&1
grep -E '^% [0-9]+ messages produced' "$OUT/produce.out" | tail -1
cpu() { awk '{print $14+$15}' /proc/"$KELP_PID"/stat; }
COUNTED=${COUNTED:-context-switches,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex,syscalls:sys_enter_membarrier,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_writev}
kelp_perf_start "$MODE" "$OUT" "$COUNTED"
[[ -z "$PERF_PID" ]] || sleep 0.3
c0=$(cpu)
timeout 120 "$RDK" -C -t consume -b "127.0.0.1:$PORT" -p 0 -p 1 -p 2 -p 3 -o beginning \
  -c "$RECORDS" > "$OUT/consume.out" 2>&1 || true
c1=$(cpu)
kelp_perf_stop
line=$(grep -E '^% [0-9]+ messages \([0-9]+ bytes\) consumed' "$OUT/consume.out" | tail -1) || {
  echo "rdkafka_performance printed no consume summary: $OUT/consume.out" >&2
  exit 1
}
echo "$line"
bytes=$(sed -E 's/^% [0-9]+ messages \(([0-9]+) bytes\).*/\1/' <<< "$line")
python3 -c "import sys; c0, c1, b = map(int, sys.argv[1:]); print(f'consume from the cache: {(c1 - c0) / 100 / (b / 1e9):.3f} CPU-s/GB')" "$c0" "$c1" "$bytes"
if [[ $MODE == dwarf ]]; then
  kelp_flame "$OUT" "kelp ${KELP_ARGS:-}: consume from the cache"
fi
if [[ $MODE == count ]]; then
  kelp_counts_per_gb "$OUT" "$bytes"
fi
