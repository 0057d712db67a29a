# Sourced by perf scripts that run a Kelp of their own (flamegraph.sh, steady.sh, consume.sh).
# kelp_start OUT PORT ARGS... starts $KELP_BIN in the background on 127.0.0.1:PORT with its
# data under OUT/data and output in OUT/kelp.out, sets KELP_PID, and waits for the port; on
# exit, kelp_stop stops a perf recorder left running (PERF_PID) and the broker, by PID, and
# removes OUT/data (GBs after a steady-state run: a loop of runs filled the disk) unless
# KEEP_DATA=1. kelp_create_topic PORT TOPIC PARTITIONS creates a topic on it (kafka-python,
# from scripts/install-deps.sh). kelp_flame OUT TITLE draws OUT/perf.data (DWARF call graphs)
# into OUT/flame.svg when inferno is installed (perf/flamegraph.sh installs it).

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
