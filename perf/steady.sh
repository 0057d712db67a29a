#!/usr/bin/env bash
# Broker CPU per GB in steady state: a fresh Kelp is filled first (its batch cache full and
# evicting, malloc's heap grown), then measured while librdkafka's rdkafka_performance (the
# light client, perf/rdkafka.sh) produces more. Prints CPU-s per GB, minor page faults, and
# the split between the shard executor threads and their I/O pool threads (the "shards" are
# the two busiest threads; with more cores set SHARDS).
#
#   perf/steady.sh STORAGE ACKS [OUT_DIR] [none|perf|dwarf|faults|trace|count]
#
# Environment: KELP_BIN (target/release/kelp), KELP_CORES (0-1), SHARDS (2), PORT (39650),
# WARMUP (1,300,000 records), RECORDS (1,000,000), PARTITIONS (4), CACHE (bytes per core,
# 512 MiB), KELP_ARGS (more broker flags, e.g. "--fsync never"), CLIENT_ARGS (more
# rdkafka_performance flags, e.g. "-r 200000" for a fixed offered load of 200k records/s),
# COUNT_EXTRA (more events for `count`, e.g. probe_libc:malloc after
# `perf probe -x /lib/x86_64-linux-gnu/libc.so.6 --add malloc`).
# `perf`/`dwarf` record the measured phase with Linux perf into OUT_DIR/perf.data (FREQ
# samples per second, 499)
# (`faults`: every 64th page fault, with its call stack; `trace`: every event named by TRACE
# (syscalls:sys_enter_futex: malloc's arena lock and the I/O pool's hand-off;
# sched:sched_switch: why threads sleep), with its call stack; `count`: syscalls and context
# switches per GB, from `perf stat`).
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
COUNTED=${COUNT_EXTRA:+$COUNT_EXTRA,}context-switches,syscalls:sys_enter_fdatasync,syscalls:sys_enter_pwrite64,syscalls:sys_enter_pwritev,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex,syscalls:sys_enter_membarrier,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg
rm -rf "$OUT"; mkdir -p "$OUT"
# shellcheck source=kelp_proc.sh
. "$HERE/kelp_proc.sh"
# shellcheck disable=SC2086 # KELP_ARGS is a list of flags
kelp_start "$OUT" "$PORT" --storage "$ST" --cache-bytes-per-core "${CACHE:-536870912}" ${KELP_ARGS:-}
kelp_create_topic "$PORT" steady "$PARTS"
A=$([[ $ACKS == all ]] && echo -1 || echo "$ACKS")
produce() {
  # shellcheck disable=SC2086 # CLIENT_ARGS is a list of flags
  /usr/bin/time -o "$OUT/client-cpu.txt" -f "%U %S" "$RDK" -P -t steady -b "127.0.0.1:$PORT" -s 1024 -c "$1" -a "$A" -X linger.ms=5 \
    -X batch.size=131072 -X queue.buffering.max.messages=1000000 ${CLIENT_ARGS:-} > "$OUT/client.out" 2>&1 || true
  grep -E '^% [0-9]+ messages produced' "$OUT/client.out" | tail -1 | grep . || {
    echo "rdkafka_performance printed no summary: $OUT/client.out, $OUT/kelp.out" >&2
    tail -5 "$OUT/client.out" "$OUT/kelp.out" >&2
    return 1
  }
}
produce "$WARMUP" > "$OUT/warmup.txt"
# Per-thread CPU ticks (utime+stime), as "tid:ticks" words.
threads() { for t in /proc/"$KELP_PID"/task/*; do echo "${t##*/}:$(awk '{print $14+$15}' "$t/stat")"; done | tr '\n' ' '; }
# Busy ticks of the whole machine: what the kernel does for Kelp in threads of its own
# (page cache writeback, reclaim) is not in Kelp's figure.
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
# Page-cache writes are written back later by kernel threads: the warm-up's before the
# measured phase, the measured phase's inside it, so both ways of writing pay their device
# writes in the window.
flush() { if [[ -d "$OUT/data" ]]; then sync -f "$OUT/data"; fi; }
# Machine-wide events, the VM's costly ones (each a VM exit or an interrupt): block device
# write and flush requests (all disks), inter-processor interrupts, and every device
# interrupt. CPU time on this VM varies by +-30 % with the host's load; these counts do not.
events() {
  local d w=0 f=0 st
  for d in /sys/block/*; do
    [[ ${d##*/} == loop* || ${d##*/} == ram* ]] && continue
    read -ra st < "$d/stat"
    w=$((w + st[4])) f=$((f + ${st[15]:-0}))
  done
  printf "%d %d " "$w" "$f"
  awk '/^ *(RES|CAL|TLB):/ {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) ipi += $i}
       /^ *[0-9]+:/ {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) irq += $i}
       END {printf "%d %d\n", ipi, irq}' /proc/interrupts
}
flush
e0=$(events); t0=$(threads); c0=$(awk '{print $14+$15, $10}' /proc/"$KELP_PID"/stat); b0=$(busy)
kelp_perf_start "$MODE" "$OUT" "$COUNTED"
sleep 0.3
produce "$RECORDS" | tee "$OUT/run.txt"
flush
kelp_perf_stop
e1=$(events); t1=$(threads); c1=$(awk '{print $14+$15, $10}' /proc/"$KELP_PID"/stat); b1=$(busy)
client=$(awk '{print $1+$2}' "$OUT/client-cpu.txt")
grep VmHWM /proc/"$KELP_PID"/status
if [[ $MODE == dwarf ]]; then
  kelp_flame "$OUT" "kelp --storage $ST, acks=$ACKS, steady state"
fi
if [[ $MODE == count ]]; then
  kelp_counts_per_gb "$OUT" $((RECORDS * 1024))
fi
python3 - "$ST" "$ACKS" "$RECORDS" "$SHARDS" "$c0" "$c1" "$t0" "$t1" "$b0" "$b1" "$client" "$e0" "$e1" <<'PY'
import sys
st, acks, records, shards, c0, c1, t0, t1, b0, b1, client, e0, e1 = sys.argv[1:]
gb = int(records) * 1024 / 1e9
(cpu0, f0), (cpu1, f1) = (map(int, c.split()) for c in (c0, c1))
a = dict(w.split(":") for w in t0.split())
b = dict(w.split(":") for w in t1.split())
d = sorted((int(v) - int(a.get(k, 0)) for k, v in b.items()), reverse=True)
n = int(shards)
print(f"{st} acks={acks}: {(cpu1 - cpu0) / 100 / gb:.2f} CPU-s/GB, {f1 - f0} minor faults; "
      f"shards {sum(d[:n]) / 100 / gb:.2f}, pool {sum(d[n:]) / 100 / gb:.2f} CPU-s/GB; "
      f"rest of the machine (kernel threads, not the client) "
      f"{((int(b1) - int(b0) - (cpu1 - cpu0)) / 100 - float(client)) / gb:.2f} CPU-s/GB")
ev = [(int(y) - int(x)) / gb for x, y in zip(e0.split(), e1.split())]
print("machine events per GB: {:.0f} disk writes, {:.0f} disk flushes, {:.0f} IPIs, "
      "{:.0f} device interrupts".format(*ev))
PY
