#!/usr/bin/env bash
# Broker CPU per GB in steady state: a fresh Kelp is filled first (its batch cache full and
# evicting, malloc's heap grown), then measured while librdkafka's rdkafka_performance (the
# light client, perf/rdkafka.sh) produces more. Prints CPU-s per GB, minor page faults, and
# the split between the shard executor threads and their I/O pool threads (the "shards" are
# the two busiest threads; with more cores set SHARDS).
#
#   perf/steady.sh STORAGE ACKS [OUT_DIR] [none|perf|dwarf]
#
# Environment: KELP_BIN (target/release/kelp), KELP_CORES (0-1), SHARDS (2), PORT (39650),
# WARMUP (1,300,000 records), RECORDS (1,000,000), PARTITIONS (4), CACHE (bytes per core,
# 512 MiB). `perf`/`dwarf` record the measured phase with Linux perf into OUT_DIR/perf.data.
# Needs kafka-python (scripts/install-deps.sh) to create the topic.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
ST="${1:?storage: memory|local}" ACKS="${2:?acks: all|1}"
OUT="${3:-$HERE/work/steady}" MODE="${4:-none}"
KELP_BIN="${KELP_BIN:-$ROOT/target/release/kelp}" PORT="${PORT:-39650}"
WARMUP="${WARMUP:-1300000}" RECORDS="${RECORDS:-1000000}" PARTS="${PARTITIONS:-4}"
SHARDS="${SHARDS:-2}"
RDK="$("$HERE/rdkafka.sh")"
rm -rf "$OUT"; mkdir -p "$OUT"
# shellcheck source=kelp_proc.sh
. "$HERE/kelp_proc.sh"
kelp_start "$OUT" "$PORT" --storage "$ST" --cache-bytes-per-core "${CACHE:-536870912}"
python3 - "$PORT" "$PARTS" <<'PY'
import sys
from kafka.admin import KafkaAdminClient, NewTopic
a = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{sys.argv[1]}")
a.create_topics([NewTopic("steady", int(sys.argv[2]), 1)])
a.close()
PY
A=$([[ $ACKS == all ]] && echo -1 || echo "$ACKS")
produce() {
  "$RDK" -P -t steady -b "127.0.0.1:$PORT" -s 1024 -c "$1" -a "$A" -X linger.ms=5 \
    -X batch.size=131072 -X queue.buffering.max.messages=1000000 2>&1 \
    | grep -E '^% [0-9]+ messages produced' | tail -1
}
produce "$WARMUP" > "$OUT/warmup.txt"
# Per-thread CPU ticks (utime+stime), as "tid:ticks" words.
threads() { for t in /proc/"$KELP_PID"/task/*; do echo "${t##*/}:$(awk '{print $14+$15}' "$t/stat")"; done | tr '\n' ' '; }
t0=$(threads); c0=$(awk '{print $14+$15, $10}' /proc/"$KELP_PID"/stat)
case $MODE in
  perf) perf record -q -F 499 -g -p "$KELP_PID" -o "$OUT/perf.data" 2>/dev/null & PERF_PID=$! ;;
  dwarf) perf record -q -F 499 --call-graph dwarf,16384 -p "$KELP_PID" -o "$OUT/perf.data" 2>/dev/null & PERF_PID=$! ;;
  none) ;;
  *) echo "mode: none|perf|dwarf" >&2; exit 2 ;;
esac
sleep 0.3
produce "$RECORDS" | tee "$OUT/run.txt"
[[ -n "$PERF_PID" ]] && { kill -INT "$PERF_PID"; wait "$PERF_PID" || true; PERF_PID=; }
t1=$(threads); c1=$(awk '{print $14+$15, $10}' /proc/"$KELP_PID"/stat)
grep VmHWM /proc/"$KELP_PID"/status
INFERNO="${KELP_CACHE:-$HOME/.cache/kelp}/inferno/bin"
if [[ $MODE == dwarf && -x "$INFERNO/inferno-flamegraph" ]]; then
  # perf/flamegraph.sh installs inferno on first use.
  perf script -i "$OUT/perf.data" 2>/dev/null | "$INFERNO/inferno-collapse-perf" > "$OUT/folded.txt"
  "$INFERNO/inferno-flamegraph" --title "kelp --storage $ST, acks=$ACKS, steady state" \
    < "$OUT/folded.txt" > "$OUT/flame.svg"
  echo "flame graph: $OUT/flame.svg"
fi
python3 - "$ST" "$ACKS" "$RECORDS" "$SHARDS" "$c0" "$c1" "$t0" "$t1" <<'PY'
import sys
st, acks, records, shards, c0, c1, t0, t1 = sys.argv[1:]
gb = int(records) * 1024 / 1e9
(cpu0, f0), (cpu1, f1) = (map(int, c.split()) for c in (c0, c1))
a = dict(w.split(":") for w in t0.split())
b = dict(w.split(":") for w in t1.split())
d = sorted((int(v) - int(a.get(k, 0)) for k, v in b.items()), reverse=True)
n = int(shards)
print(f"{st} acks={acks}: {(cpu1 - cpu0) / 100 / gb:.2f} CPU-s/GB, {f1 - f0} minor faults; "
      f"shards {sum(d[:n]) / 100 / gb:.2f}, pool {sum(d[n:]) / 100 / gb:.2f} CPU-s/GB")
PY
