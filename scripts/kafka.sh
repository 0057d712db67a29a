#!/usr/bin/env bash
# Runs a real Apache Kafka 4.x broker, single node, KRaft combined mode (broker + controller,
# node.id=1), from the Maven Central jars that scripts/install-deps.sh puts in
# ${KELP_CACHE:-~/.cache/kelp}/jars/kafka. It is the reference the end-to-end tests are checked
# against and the baseline of the perf comparisons.
#
#   scripts/kafka.sh start [PORT]   # PLAINTEXT on 127.0.0.1:PORT (default 19092), controller on
#                                   # 127.0.0.1:PORT+1; fresh storage; returns once it answers
#   scripts/kafka.sh stop [PORT]    # stops it by its PID file and removes its data
#   scripts/kafka.sh status [PORT]
#   scripts/kafka.sh restart [PORT]  # stops it and starts it again on the same data
#
#   KELP_BOOTSTRAP=127.0.0.1:19092 python3 -m pytest -v tests/e2e   # the suite against Kafka
#
# KAFKA_VERSION picks the release (default: the one in jars/kafka, 4.1.1 as scripts/install-deps.sh
# installs it). Another version runs from jars/kafka-VERSION, installed on first use by
# `scripts/install-deps.sh --kafka-broker VERSION` (broker jars only), e.g. share groups (KIP-932),
# on by default from 4.2:
#   KAFKA_VERSION=4.2.1 scripts/kafka.sh start 19592
#
# Environment: KAFKA_HEAP_OPTS (default -Xms512m -Xmx1g), KAFKA_CONTROLLER_PORT,
# KAFKA_RUN_DIR (default ${TMPDIR:-/tmp}/kelp-kafka-PORT: config, data, kafka.log, kafka.pid),
# KAFKA_EXTRA_CONFIG (extra server.properties lines, e.g. $'num.network.threads=4\nnum.io.threads=8'),
# KAFKA_START_TIMEOUT (seconds, default 90), KAFKA_KEEP_DATA=1 (stop keeps the run dir).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
JARS="$CACHE/jars/kafka"
# KAFKA_VERSION other than the default dir's: its own dir (filled on start when missing).
if [ -n "${KAFKA_VERSION:-}" ] && [ ! -f "$JARS/kafka_2.13-$KAFKA_VERSION.jar" ]; then
  JARS="$CACHE/jars/kafka-$KAFKA_VERSION"
fi

CMD="${1:-}"
PORT="${2:-19092}"
CPORT="${KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
RUN="${KAFKA_RUN_DIR:-${TMPDIR:-/tmp}/kelp-kafka-$PORT}"
PIDFILE="$RUN/kafka.pid"
LOG="$RUN/kafka.log"
log() { echo "kafka.sh: $*"; }

usage() {
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# The PID in the PID file, if that process is alive and is our Kafka (guards against reuse).
running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kafka.Kafka $RUN/server.properties" || return 1
  echo "$pid"
}

# Sends ApiVersions v0 and waits for a well-formed answer: the broker is serving requests (a
# bare TCP connect can succeed on the bound acceptor before Kafka processes anything).
answers() {
  python3 - "$1" <<'EOF'
import socket, struct, sys
port = int(sys.argv[1])
try:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.settimeout(3)
        cid = b"kelp-kafka.sh"
        body = struct.pack(">hhih", 18, 0, 7, len(cid)) + cid
        s.sendall(struct.pack(">i", len(body)) + body)
        hdr = b""
        while len(hdr) < 10:
            chunk = s.recv(10 - len(hdr))
            if not chunk:
                sys.exit(1)
            hdr += chunk
        size, corr, err = struct.unpack(">iih", hdr)
        sys.exit(0 if corr == 7 and err == 0 and size > 6 else 1)
except OSError:
    sys.exit(1)
EOF
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start [keep]: "keep" starts on the run dir's existing config and data (restart).
start() {
  local keep="${1:-}"
  if pid="$(running_pid)"; then
    log "already running (pid $pid) on 127.0.0.1:$PORT"
    return 0
  fi
  if [ "$JARS" != "$CACHE/jars/kafka" ] && ! ls "$JARS"/kafka_2.13-*.jar >/dev/null 2>&1; then
    log "installing Kafka $KAFKA_VERSION's jars into $JARS"
    scripts/install-deps.sh --kafka-broker "$KAFKA_VERSION" >&2
  fi
  if ! ls "$JARS"/kafka_2.13-*.jar >/dev/null 2>&1; then
    log "no Kafka jars in $JARS: run scripts/install-deps.sh first" >&2
    exit 1
  fi
  for p in "$PORT" "$CPORT"; do
    if port_in_use "$p"; then
      log "127.0.0.1:$p is already in use" >&2
      exit 1
    fi
  done
  if [ "$keep" = "keep" ] && [ -f "$RUN/server.properties" ]; then
    start_jvm
    return
  fi
  rm -rf "$RUN"
  mkdir -p "$RUN/data"
  echo "$JARS" >"$RUN/jars-dir"  # restart runs the same release on this data
  cat >"$RUN/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$RUN/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=${KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS:-300}
${KAFKA_EXTRA_CONFIG:-}
EOF
  cat >"$RUN/log4j2.properties" <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ${sys:kafka.log.level:-INFO}
rootLogger.appenderRef.console.ref = STDOUT
logger.kafka-request.name = kafka.request.logger
logger.kafka-request.level = WARN
logger.state-change.name = state.change.logger
logger.state-change.level = WARN
EOF
  local cluster_id
  cluster_id="$(java -cp "$JARS/*" "${JVM[@]}" kafka.tools.StorageTool random-uuid 2>>"$LOG" | tail -1)"
  log "formatting $RUN/data (cluster id $cluster_id, Kafka $(jar_version))"
  java -cp "$JARS/*" "${JVM[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
    -c "$RUN/server.properties" >>"$LOG" 2>&1 || { tail -30 "$LOG" >&2; exit 1; }
  start_jvm
}

JVM=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
     -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
     "-Dlog4j2.configurationFile=$RUN/log4j2.properties")

jar_version() {
  local version
  version="$(basename "$(ls "$JARS"/kafka_2.13-*.jar | head -1)" .jar)"
  echo "${version#kafka_2.13-}"
}

# Starts the broker on the run dir's config and formatted data; returns once it answers.
start_jvm() {
  local heap="${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g}"
  local cp="$JARS/*"
  local version
  version="$(jar_version)"

  log "starting Kafka $version on 127.0.0.1:$PORT (controller 127.0.0.1:$CPORT), log $LOG"
  # setsid: its own session, so the caller's terminal or job control never signals it.
  # shellcheck disable=SC2086
  setsid java $heap "${JVM[@]}" -cp "$cp" kafka.Kafka "$RUN/server.properties" \
    >>"$LOG" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  local deadline=$((SECONDS + ${KAFKA_START_TIMEOUT:-90}))
  while ! answers "$PORT"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "Kafka exited during startup; last log lines:" >&2
      tail -40 "$LOG" >&2
      rm -f "$PIDFILE"
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "Kafka did not answer on 127.0.0.1:$PORT within ${KAFKA_START_TIMEOUT:-90}s; stopping it" >&2
      tail -40 "$LOG" >&2
      stop
      exit 1
    fi
    sleep 0.5
  done
  log "ready: bootstrap 127.0.0.1:$PORT (pid $pid)"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    log "not running on port $PORT (no live PID in $PIDFILE)"
    rm -f "$PIDFILE"
    return 0
  fi
  log "stopping pid $pid"
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid still alive after 30s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$PIDFILE"
  if [ "${KAFKA_KEEP_DATA:-0}" != "1" ]; then
    rm -rf "$RUN"
  fi
  log "stopped"
}

status() {
  local pid
  if pid="$(running_pid)"; then
    log "running (pid $pid) on 127.0.0.1:$PORT, run dir $RUN"
  else
    log "not running on port $PORT"
    return 1
  fi
}

restart() {
  if ! running_pid >/dev/null; then
    log "not running on port $PORT: nothing to restart" >&2
    exit 1
  fi
  if [ -z "${KAFKA_VERSION:-}" ] && [ -f "$RUN/jars-dir" ]; then
    JARS="$(cat "$RUN/jars-dir")"
  fi
  KAFKA_KEEP_DATA=1 stop
  start keep
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  restart) restart ;;
  status) status ;;
  *) usage ;;
esac
