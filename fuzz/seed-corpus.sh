#!/usr/bin/env bash
# Seeds fuzz/corpus/{record_batch,log_recovery} from data real clients wrote: runs
# target/release/kelp on local storage in a temp data dir, produces with kcat (librdkafka),
# kafka-python, confluent-kafka (with headers) and the Java client (ProducerPerformance from
# the Kafka jars scripts/install-deps.sh fetched), each codec, commits group offsets, stops
# Kelp and cuts the segment and offsets files into seeds (fuzz/seed_split.py).
#
#   fuzz/seed-corpus.sh            # needs target/release/kelp, kcat, java, the Python clients
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${SEED_PORT:-39092}"
BS="127.0.0.1:$PORT"
DIR="$(mktemp -d /tmp/kelp-seed-XXXXXX)"
JARS="${KELP_CACHE:-$HOME/.cache/kelp}/jars/kafka"
target/release/kelp --listen "$BS" --advertised-host 127.0.0.1 --storage local \
  --data-dir "$DIR" --default-partitions 1 --cores 0 >"$DIR/kelp.out" 2>&1 &
KELP_PID=$!
trap 'kill $KELP_PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.2; done

for z in none gzip snappy lz4 zstd; do
  seq 1 40 | sed 's/^/kcat-value-/' | kcat -P -b "$BS" -t "kcat-$z" -z "$z" -K: -H h1=v1 -X linger.ms=5
  printf 'k1:one\nk2:two\n' | kcat -P -b "$BS" -t "kcat-$z" -z "$z" -K:
done
python3 - "$BS" <<'PY'
import sys
from kafka import KafkaProducer, KafkaConsumer
from confluent_kafka import Producer
bs = sys.argv[1]
for z in [None, "gzip", "snappy", "lz4", "zstd"]:
    try:
        p = KafkaProducer(bootstrap_servers=bs, compression_type=z, linger_ms=5)
    except Exception as e:  # codec library missing
        print("kafka-python", z, "skipped:", e)
        continue
    for i in range(30):
        p.send(f"kpy-{z or 'none'}", key=f"k{i}".encode() if i % 2 else None,
               value=(f"kafka-python {i} " * (i % 7 + 1)).encode(), headers=[("hdr", b"x")] if i % 3 == 0 else None)
    p.flush(); p.close()
for z in ["none", "gzip", "snappy", "lz4", "zstd"]:
    p = Producer({"bootstrap.servers": bs, "compression.type": z, "linger.ms": 5})
    for i in range(25):
        p.produce(f"ck-{z}", key=None if i % 4 == 0 else f"key-{i}", value=b"v" * (i * 3),
                  headers=[("a", b"1"), ("empty", None)] if i % 2 else None)
    p.flush(10)
c = KafkaConsumer("ck-none", bootstrap_servers=bs, group_id="seed-group", auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=3000)
for _ in c:
    pass
c.commit(); c.close()
PY
for z in none gzip snappy lz4 zstd; do
  java -cp "$JARS/*" org.apache.kafka.tools.ProducerPerformance --topic "java-$z" --num-records 200 \
    --record-size 60 --throughput -1 --producer-props bootstrap.servers="$BS" compression.type="$z" \
    linger.ms=5 batch.size=4096 >/dev/null 2>&1 || echo "java $z failed"
done
kill $KELP_PID; wait $KELP_PID 2>/dev/null || true
python3 fuzz/seed_split.py "$DIR" fuzz/corpus
rm -rf "$DIR"
