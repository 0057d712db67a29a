"""Produce keyed records with headers and explicit timestamps to a multi-partition topic and read
them all back, with real clients: confluent-kafka (librdkafka 2.x), kafka-python, Debian's kcat
(librdkafka 2.0.2, strict about ApiVersions) and the Java client 4.x. Every compression codec
round-trips. Assertions are exact: each record comes back once, at the partition and offset its
delivery report gave, with its key, value, headers (in order) and CreateTime timestamp; offsets
are contiguous from 0 in every partition and the high watermarks equal the record counts.

No consumer groups here: consumers use assign() from the beginning (confluent-kafka insists on a
group.id, which is set but never used: no subscribe, no commit).
"""

import shutil
import subprocess
import time
import uuid

import pytest

import conftest
from conftest import require

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 4
BASE_TS = 1_700_000_000_000
POLL_DEADLINE_S = 60


def topic_name(tag):
    return f"rt-{tag}-{uuid.uuid4().hex[:8]}"


def expected_headers(i, codec):
    return [("idx", str(i).encode()), ("codec", codec.encode())]


def check_round_trip(got, delivered, n, codec):
    """got: consumed (key, value, partition, offset, headers list, (ts_type, ts)) tuples, in
    arrival order; delivered: key -> (partition, offset) from the producer's reports."""
    assert len(delivered) == n, f"{codec}: {len(delivered)} delivery reports for {n} records"
    seen = {}
    for k, v, p, off, headers, ts in got:
        assert k not in seen, f"{codec}: {k!r} consumed twice: at {seen[k]} and {(p, off)}"
        seen[k] = (p, off)
    missing = [f"key-{i}" for i in range(n) if f"key-{i}".encode() not in seen]
    assert not missing, f"{codec}: {len(missing)} of {n} records never consumed, e.g. {missing[:5]}"
    assert len(got) == n, f"{codec}: consumed {len(got)} records, produced {n}"
    for k, v, p, off, headers, ts in got:
        i = int(k.split(b"-")[1])
        assert (p, off) == delivered[k], f"{codec}: {k!r} consumed at {(p, off)}, delivered at {delivered[k]}"
        assert v == f"value-{i}-{codec}".encode(), f"{codec}: {k!r} value {v!r}"
        assert headers == expected_headers(i, codec), f"{codec}: {k!r} headers {headers!r}"
        assert ts == ("create", BASE_TS + i), f"{codec}: {k!r} timestamp {ts!r}, want CreateTime {BASE_TS + i}"
    by_part = {}
    for k, (p, off) in delivered.items():
        by_part.setdefault(p, []).append(off)
    for p, offs in sorted(by_part.items()):
        assert sorted(offs) == list(range(len(offs))), \
            f"{codec}: partition {p} offsets not contiguous from 0: {sorted(offs)[:20]}"
    # Within a partition, records come back in offset order.
    for p in by_part:
        offs = [off for _, _, pp, off, _, _ in got if pp == p]
        assert offs == sorted(offs), f"{codec}: partition {p} consumed out of order: {offs[:20]}"
    assert len(by_part) > 1, f"{codec}: keys should spread over several partitions, got {sorted(by_part)}"
    return {p: len(offs) for p, offs in by_part.items()}


# --------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka 2.x)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(broker, codec):
    from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    n = 2000
    topic = topic_name("ck")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for t, f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=15).items():
        f.result(30)
    md = admin.list_topics(topic, timeout=15)
    assert len(md.topics[topic].partitions) == PARTITIONS, md.topics[topic].partitions

    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 5, "acks": "all", "enable.idempotence": False})
    errors, delivered = [], {}

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{msg.key()!r}: {err}")
        else:
            delivered[msg.key()] = (msg.partition(), msg.offset())

    for i in range(n):
        p.produce(topic, key=f"key-{i}".encode(), value=f"value-{i}-{codec}".encode(),
                  headers=expected_headers(i, codec), timestamp=BASE_TS + i,
                  on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(30) == 0, "producer did not deliver everything within 30 s"
    assert not errors, f"{len(errors)} delivery errors, e.g. {errors[:3]}"

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
    got, deadline = [], time.monotonic() + POLL_DEADLINE_S
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, f"consumer error: {m.error()}"
            ts_type, ts = m.timestamp()
            got.append((m.key(), m.value(), m.partition(), m.offset(), list(m.headers() or []),
                        ("create" if ts_type == TIMESTAMP_CREATE_TIME else ts_type, ts)))
        # Nothing more than what was produced.
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.key(), m.value(), m.partition(), m.offset(),
                            list(m.headers() or []), ("extra", m.timestamp()[1])))
        counts = check_round_trip(got, delivered, n, codec)
        for part in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
            assert (lo, hi) == (0, counts.get(part, 0)), \
                f"{codec}: partition {part} watermarks {(lo, hi)}, want (0, {counts.get(part, 0)})"
    finally:
        c.close()


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_log_append_time_topic(broker, codec):
    """A topic created with message.timestamp.type=LogAppendTime: the broker's clock replaces
    the producer's timestamps (Kafka's behaviour, librdkafka's test 0052). The delivery
    reports and the consumer see the broker's append time, the same for a whole batch, never
    the producer's old timestamp."""
    from confluent_kafka import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer,
                                 Producer, TopicPartition)
    from confluent_kafka.admin import AdminClient, NewTopic

    n, topic = 200, topic_name("lat")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime"})
    for f in admin.create_topics([new], operation_timeout=15).values():
        f.result(30)
    before = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 20, "acks": "all"})
    reports = []
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), timestamp=BASE_TS + i,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset(), msg.timestamp())))
    assert p.flush(30) == 0
    after = int(time.time() * 1000)
    assert [r[0] for r in reports] == [None] * n
    assert all(r[2][0] == TIMESTAMP_LOG_APPEND_TIME and before <= r[2][1] <= after
               for r in reports), reports[:3]
    stamped = {r[1]: r[2][1] for r in reports}

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = {}, time.monotonic() + POLL_DEADLINE_S
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got[m.offset()] = m.timestamp()
    finally:
        c.close()
    assert sorted(got) == list(range(n))
    # Each record carries the time its batch was appended. Over SeaweedMQ, records read back
    # from SeaweedMQ (not Kelp's cache) keep that time as a CreateTime: SeaweedMQ keeps one
    # timestamp per record and no batch attributes.
    types = {TIMESTAMP_LOG_APPEND_TIME}
    if conftest.STORAGE == "seaweedmq":
        types.add(TIMESTAMP_CREATE_TIME)
    for off, (ts_type, ts) in got.items():
        assert ts_type in types and ts == stamped[off], (off, ts_type, ts, stamped[off])


def test_compacted_topic_refuses_keyless_records(broker):
    """cleanup.policy=compact: a record without a key is refused with INVALID_RECORD, as Kafka
    refuses it (librdkafka's test 0011); keyed records go in, compressed or not."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("compact")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})
    for f in admin.create_topics([new], operation_timeout=15).values():
        f.result(30)
    for codec in ("none", "zstd"):
        p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                      "acks": "all", "enable.idempotence": False, "retries": 0})
        results = []
        p.produce(topic, value=b"no key", on_delivery=lambda err, msg: results.append(err))
        assert p.flush(30) == 0
        p.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda err, m: results.append(err))
        assert p.flush(30) == 0
        assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD, results
        assert results[1] is None, results


# --------------------------------------------------------------------------------------------
# kafka-python
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(broker, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    n = 2000
    topic = topic_name("kp")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout_ms=15000)
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                      compression_type=None if codec == "none" else codec,
                      request_timeout_ms=15000)
    try:
        futures = [(f"key-{i}".encode(),
                    p.send(topic, key=f"key-{i}".encode(), value=f"value-{i}-{codec}".encode(),
                           headers=expected_headers(i, codec), timestamp_ms=BASE_TS + i))
                   for i in range(n)]
        p.flush(30)
        delivered = {}
        for k, f in futures:
            md = f.get(timeout=10)
            delivered[k] = (md.partition, md.offset)
    finally:
        p.close(timeout=10)

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      enable_auto_commit=False, consumer_timeout_ms=1000,
                      request_timeout_ms=15000)
    try:
        tps = [TopicPartition(topic, i) for i in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got, deadline = [], time.monotonic() + POLL_DEADLINE_S
        while len(got) < n + 1 and time.monotonic() < deadline:
            batch = list(c)  # ends after consumer_timeout_ms without records
            for m in batch:
                got.append((m.key, m.value, m.partition, m.offset, list(m.headers),
                            ("create" if m.timestamp_type == 0 else m.timestamp_type, m.timestamp)))
            if not batch and len(got) >= n:
                break
        counts = check_round_trip(got, delivered, n, codec)
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == {tp: counts.get(tp.partition, 0) for tp in tps}
    finally:
        c.close()


# --------------------------------------------------------------------------------------------
# kcat 1.7.1 (librdkafka 2.0.2)
# --------------------------------------------------------------------------------------------

def run(cmd, timeout, input=None):
    r = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}"
    return r


def test_kcat_old_librdkafka(broker):
    require(shutil.which("kcat") is not None, "kcat")
    topic = topic_name("kcat")
    bs = ["-b", broker.bootstrap]
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]  # one per partition
    parts = len(codecs)
    # kcat has no admin verbs: create the topic with confluent's admin client.
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, parts, 1)])[topic].result(30)

    n_per = 200
    t0 = int(time.time() * 1000)
    for part, codec in enumerate(codecs):
        lines = "".join(f"key-{part}-{i}:value-{part}-{i}-{codec}\n" for i in range(n_per))
        run(["kcat", "-P", *bs, "-t", topic, "-p", str(part), "-K:", "-z", codec,
             "-H", f"part={part}", "-H", f"codec={codec}",
             "-X", "linger.ms=5", "-X", "request.required.acks=-1"], 60, input=lines)
    t1 = int(time.time() * 1000)

    r = run(["kcat", "-L", *bs, "-t", topic], 30)
    assert f'topic "{topic}" with {parts} partitions:' in r.stdout, r.stdout
    brokers = set()
    for line in r.stdout.splitlines():
        line = line.strip()
        if line.startswith("broker ") and " at " in line:
            brokers.add(line.split()[1])
    for part in range(parts):
        rows = [ln.strip() for ln in r.stdout.splitlines()
                if ln.strip().startswith(f"partition {part}, leader ")]
        assert len(rows) == 1, f"partition {part} not listed once:\n{r.stdout}"
        leader = rows[0].split(",")[1].split()[1]
        assert leader in brokers, f"partition {part} leader {leader} is not a listed broker {brokers}:\n{r.stdout}"
        assert "Broker:" not in rows[0], f"partition {part} has an error: {rows[0]}"

    r = run(["kcat", "-C", *bs, "-t", topic, "-o", "beginning", "-e", "-q",
             "-f", "%k|%s|%o|%p|%h|%T\n"], 120)
    rows = [line.split("|") for line in r.stdout.splitlines() if line]
    assert len(rows) == parts * n_per, f"consumed {len(rows)} of {parts * n_per}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    for part, codec in enumerate(codecs):
        mine = [row for row in rows if row[3] == str(part)]
        assert [int(row[2]) for row in mine] == list(range(n_per)), \
            f"partition {part} ({codec}) offsets: {[row[2] for row in mine][:20]}"
        for i, (k, v, off, p, h, ts) in enumerate(mine):
            assert (k, v, h) == (f"key-{part}-{i}", f"value-{part}-{i}-{codec}",
                                 f"part={part},codec={codec}"), mine[i]
            assert t0 - 5000 <= int(ts) <= t1 + 5000, \
                f"partition {part} offset {off}: timestamp {ts} outside produce window [{t0}, {t1}]"

    # Per-partition consumption with an explicit offset works too.
    r = run(["kcat", "-C", *bs, "-t", topic, "-p", "4", "-o", str(n_per - 3), "-e", "-q",
             "-f", "%k:%o\n"], 60)
    assert r.stdout.split() == [f"key-4-{i}:{i}" for i in range(n_per - 3, n_per)], r.stdout


# --------------------------------------------------------------------------------------------
# Java kafka-clients 4.x
# --------------------------------------------------------------------------------------------

def test_java_client_round_trip(broker, tmp_path):
    n = 2000
    out = conftest.java_round_trip(tmp_path, broker.bootstrap, topic_name("java"), n)
    print(out.stdout)
    assert out.returncode == 0, \
        f"ClientRoundTrip exited {out.returncode}\nstdout:\n{out.stdout[-4000:]}\nstderr:\n{out.stderr[-6000:]}"
    for codec in CODECS:
        assert f"OK {codec} {n}" in out.stdout, out.stdout
