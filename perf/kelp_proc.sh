# Sourced by perf scripts that run a Kelp of their own (flamegraph.sh, steady.sh, consume.sh).
# kelp_start OUT PORT ARGS... starts $KELP_BIN in the background on 127.0.0.1:PORT with its
# data under OUT/data and output in OUT/kelp.out, sets KELP_PID, and waits for the port; on
# exit, kelp_stop stops a perf recorder left running (PERF_PID) and the broker, by PID, and
# removes OUT/data (GBs after a steady-state run: a loop of runs filled the disk) unless
# KEEP_DATA=1. kelp_create_topic PORT TOPIC PARTITIONS creates a topic on it (kafka-python,
# from scripts/install-deps.sh). kelp_perf_start MODE OUT EVENTS starts recording the broker
# with Linux perf (none|perf|dwarf|faults|trace|count, see steady.sh; `count` counts the
# comma-separated EVENTS into OUT/counts.csv) and sets PERF_PID, kelp_perf_stop ends it;
# kelp_flame OUT TITLE draws OUT/perf.data (DWARF call graphs) into OUT/flame.svg when inferno
# is installed (perf/flamegraph.sh installs it); kelp_counts_per_gb OUT BYTES prints
# OUT/counts.csv per GB of BYTES.

kelp_start() {
  local out=$1 port=$2
  shift 2
  "$KELP_BIN" --listen "127.0.0.1:$port" --advertised-host 127.0.0.1 --data-dir "$out/data" \
    --cores "${KELP_CORES:-0-1}" --log-level warn "$@" > "$out/kelp.out" 2>&1 < /dev/null &
  KELP_PID=$!
  KELP_DATA="$out/data"
  PERF_PID=
  trap kelp_stop EXIT
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "kelp did not listen on 127.0.0.1:$port; see $out/kelp.out" >&2
  return 1
}

kelp_stop() {
  [[ -n "${PERF_PID:-}" ]] && kill -INT "$PERF_PID" 2>/dev/null && wait "$PERF_PID" 2>/dev/null
  PERF_PID=
  kill "$KELP_PID" 2>/dev/null && wait "$KELP_PID" 2>/dev/null
  [[ "${KEEP_DATA:-0}" == 1 || -z "${KELP_DATA:-}" ]] || rm -rf "$KELP_DATA"
  true
}

kelp_create_topic() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
from kafka.admin import KafkaAdminClient, NewTopic
a = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{sys.argv[1]}")
a.create_topics([NewTopic(sys.argv[2], int(sys.argv[3]), 1)])
a.close()
PY
}

kelp_flame() {
  local out=$1 title=$2 inferno="${KELP_CACHE:-$HOME/.cache/kelp}/inferno/bin"
  [[ -x "$inferno/inferno-flamegraph" ]] || return 0
  perf script -i "$out/perf.data" 2>/dev/null | "$inferno/inferno-collapse-perf" > "$out/folded.txt"
  "$inferno/inferno-flamegraph" --title "$title" < "$out/folded.txt" > "$out/flame.svg"
  echo "flame graph: $out/flame.svg"
}

kelp_perf_start() {
  local mode=$1 out=$2 events=$3
  PERF_PID=
  case $mode in
    perf) perf record -q -F "${FREQ:-499}" -g -p "$KELP_PID" -o "$out/perf.data" 2>/dev/null & PERF_PID=$! ;;
    dwarf) perf record -q -F "${FREQ:-499}" --call-graph dwarf,16384 -p "$KELP_PID" -o "$out/perf.data" 2>/dev/null & PERF_PID=$! ;;
    faults) perf record -q -e page-faults -c 64 --call-graph dwarf,8192 -p "$KELP_PID" -o "$out/perf.data" 2>/dev/null & PERF_PID=$! ;;
    trace) perf record -q -e "${TRACE:-syscalls:sys_enter_futex}" --call-graph dwarf,16384 -p "$KELP_PID" -o "$out/perf.data" 2>/dev/null & PERF_PID=$! ;;
    count) perf stat -x, -o "$out/counts.csv" -e "$events" -p "$KELP_PID" 2>/dev/null & PERF_PID=$! ;;
    none) ;;
    *) echo "mode: none|perf|dwarf|faults|trace|count" >&2; exit 2 ;;
  esac
}

kelp_perf_stop() {
  [[ -z "${PERF_PID:-}" ]] || { kill -INT "$PERF_PID"; wait "$PERF_PID" || true; }
  PERF_PID=
}

kelp_counts_per_gb() {
  awk -F, -v bytes="$2" '$1 ~ /^[0-9]+$/ {sub(/^syscalls:sys_enter_/, "", $3); printf "%s %.0f/GB  ", $3, $1 / (bytes / 1e9)} END{print ""}' \
    "$1/counts.csv"
}
