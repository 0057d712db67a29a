#!/usr/bin/env bash
# Runs a real Prometheus (Debian's package, installed by scripts/install-deps.sh) scraping Kelp
# with the shipped rules (ops/prometheus/kelp-rules.yml): what tests/e2e/test_prometheus.py
# checks the rules and the dashboard against, and a quick way to look at a Kelp by hand.
#
#   scripts/prometheus.sh start DIR PORT TARGET...  # TARGET: a Kelp --metrics-addr, host:port
#       writes DIR/prometheus.yml (job "kelp" scraping every TARGET, the shipped rule files),
#       checks it with promtool, starts prometheus on 127.0.0.1:PORT with its storage in
#       DIR/data (log: DIR/prometheus.log, PID: DIR/prometheus.pid), returns once /-/ready
#       answers, and prints the URL last
#   scripts/prometheus.sh stop DIR                  # stops that prometheus by its PID
#
# Environment: PROM_INTERVAL (scrape and rule evaluation interval, default 1s: tests want
# answers within seconds; ops/prometheus/prometheus.example.yml has production values),
# PROM_START_TIMEOUT (seconds, default 60).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RULES="$ROOT/ops/prometheus/kelp-rules.yml"
log() { echo "prometheus.sh: $*" >&2; }

usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Whether process $1 runs (a zombie, which kill -0 still reaches, does not).
alive() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "${state#Z}" = "$state" ]
}

# The PID in DIR's PID file if that process is alive and is the prometheus started on DIR's
# storage (guards against a reused PID).
running_pid() {
  local dir="$1" pid
  [ -f "$dir/prometheus.pid" ] || return 1
  pid="$(cat "$dir/prometheus.pid")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "--storage.tsdb.path=$dir/data" || return 1
  echo "$pid"
}

start() {
  [ $# -ge 3 ] || usage
  local dir port pid
  mkdir -p "$1"
  dir="$(cd "$1" && pwd)"
  port="$2"
  shift 2
  command -v prometheus >/dev/null 2>&1 || { log "prometheus not installed: run scripts/install-deps.sh"; exit 1; }
  if pid="$(running_pid "$dir")"; then
    log "already running (pid $pid) on $dir"
    exit 1
  fi
  local interval="${PROM_INTERVAL:-1s}" targets="" t
  for t in "$@"; do
    targets="$targets\"$t\", "
  done
  cat >"$dir/prometheus.yml" <<EOF
# Written by scripts/prometheus.sh.
global:
  scrape_interval: $interval
  evaluation_interval: $interval
rule_files:
  - "$RULES"
scrape_configs:
  - job_name: kelp
    scrape_timeout: $interval
    static_configs:
      - targets: [${targets%, }]
EOF
  promtool check config "$dir/prometheus.yml" >"$dir/promtool-check.log" 2>&1 || {
    cat "$dir/promtool-check.log" >&2
    exit 1
  }
  mkdir -p "$dir/data"
  prometheus \
    --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" \
    --storage.tsdb.retention.time=1d \
    --web.listen-address="127.0.0.1:$port" \
    --log.level=warn \
    >>"$dir/prometheus.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$dir/prometheus.pid"
  local deadline=$((SECONDS + ${PROM_START_TIMEOUT:-60}))
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null; do
    if ! alive "$pid"; then
      log "prometheus exited during start-up:"
      tail -20 "$dir/prometheus.log" >&2
      rm -f "$dir/prometheus.pid"
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "prometheus not ready on 127.0.0.1:$port after ${PROM_START_TIMEOUT:-60}s; stopping it"
      tail -20 "$dir/prometheus.log" >&2
      stop "$dir"
      exit 1
    fi
    sleep 0.2
  done
  log "ready (pid $pid), scraping $* every $interval"
  echo "http://127.0.0.1:$port"
}

stop() {
  [ $# -eq 1 ] || usage
  local dir pid
  dir="$(cd "$1" 2>/dev/null && pwd)" || { log "no directory $1"; return 0; }
  if ! pid="$(running_pid "$dir")"; then
    log "not running on $dir"
    rm -f "$dir/prometheus.pid"
    return 0
  fi
  kill -TERM "$pid"
  local i
  for i in $(seq 1 100); do
    alive "$pid" || break
    sleep 0.2
  done
  if alive "$pid"; then
    log "pid $pid still running after 20s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/prometheus.pid"
  log "stopped (pid $pid)"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) usage ;;
esac
