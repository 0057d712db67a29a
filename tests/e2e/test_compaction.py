"""Log compaction on the embedded log (cleanup.policy=compact), with confluent-kafka: keys
overwritten many times shrink to the latest record of each, at the offset it was written at;
a tombstone goes once delete.retention.ms has passed; a reader from offset 0 sees the latest
value of every key; kill -9 while the cleaner runs loses nothing (a restart recovers either
a segment or its cleaned copy, whole). Memory and SeaweedMQ storage keep no log of Kelp's own
to clean: the local pass runs these."""

import os
import random
import signal
import time
import uuid

import pytest

import conftest

pytestmark = pytest.mark.skipif(
    bool(conftest.EXTERNAL) or conftest.ADVERTISE_SHARDS or conftest.STORAGE != "local",
    reason="the log cleaner runs on the embedded log: the local pass runs it")

KEYS = 20


def make_topic(b, extra=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = "compact-" + uuid.uuid4().hex[:8]
    # Segments roll by age at the next append (100 ms), so a few rounds make many segments.
    configs = {"cleanup.policy": "compact", "segment.ms": "100",
               "min.cleanable.dirty.ratio": "0.01", **(extra or {})}
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(15)
    return topic


def produce_rounds(b, topic, rounds, value_len=1000, tombstones=()):
    """KEYS keys written `rounds` times (a round every 150 ms, so each lands in a segment of
    its own), then the `tombstones` keys deleted, then a sentinel that seals the rest:
    {offset: (key, value)} of every record written."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5})
    written = {}

    def note(err, msg):
        assert err is None, err
        written[msg.offset()] = (msg.key(), msg.value())

    def round_of(records):
        for k, v in records:
            p.produce(topic, key=k, value=v, partition=0, on_delivery=note)
        assert p.flush(30) == 0
        time.sleep(0.15)

    for r in range(rounds):
        round_of([(f"k{i}".encode(), f"r{r}-".encode() + os.urandom(value_len // 2).hex().encode()
                   [:value_len]) for i in range(KEYS)])
    if tombstones:
        round_of([(k, None) for k in tombstones])
    # Big enough to count as dirty data beside what compaction leaves (min.cleanable.dirty.ratio).
    round_of([(b"sentinel", b"s" * 4096)])
    return written


def read_from_zero(b, topic):
    """{offset: (key, value)} read from offset 0 up to the high watermark."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused-" + topic,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = {}, time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    if not high or m.offset() >= high:
                        break
                    continue
                raise AssertionError(m.error())
            got[m.offset()] = (m.key(), m.value())
        return got
    finally:
        c.close()


def latest_per_key(written):
    latest = {}
    for off in sorted(written):
        latest[written[off][0]] = off
    return latest


def check_compacted(got, written, tombstoned=()):
    """Every record read is one written, at its offset; the latest record of every key is
    there (a tombstoned key's tombstone goes after delete.retention.ms)."""
    for off, rec in got.items():
        assert written.get(off) == rec, (off, rec)
    for key, off in latest_per_key(written).items():
        if key not in tombstoned:
            assert got.get(off) == written[off], (key, off)


def wait_compacted(b, topic, written, most, tombstoned=()):
    """Reads from 0 until at most `most` records besides sentinels are left (the cleaner's
    work) and none of the `tombstoned` keys, checking what each read holds. A cleaner round runs on new dirty data
    (Kafka's dirty ratio): a tombstone kept by one round (not yet delete.retention.ms old)
    goes in a later one, so each wait writes the sentinel key again."""
    deadline = time.monotonic() + 60
    while True:
        got = read_from_zero(b, topic)
        check_compacted(got, written, tombstoned)
        keys = [k for k, _ in got.values() if k != b"sentinel"]
        if len(keys) <= most and not set(keys) & set(tombstoned):
            return got
        assert time.monotonic() < deadline, \
            f"{len(got)} records left of {len(written)}: {sorted(got)}\n{b.log_tail()[-4000:]}"
        written.update(produce_rounds(b, topic, 0))


def segment_bytes(b, topic):
    """The log's bytes as DescribeLogDirs reports them (the active segment's file also holds
    the zeros Kelp writes ahead of its end)."""
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        [answer] = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    [d] = answer["log_dirs"]
    [t] = d["topics"]
    [p] = t["partitions"]
    return p["partition_size"]


def test_overwritten_keys_shrink_to_their_latest_records():
    # With an I/O budget (4 MB/s, far above what this needs): the throttled path cleans too.
    with conftest.running_broker(conftest.Broker, "kelp-compact-",
                                 ["--log-cleaner-backoff-ms", "200",
                                  "--log-cleaner-io-max-bytes-per-second", "4000000"]) as b:
        topic = make_topic(b, {"delete.retention.ms": "100"})
        written = produce_rounds(b, topic, 15, tombstones=[b"k0"])
        produced = sum(len(k) + len(v or b"") for k, v in written.values())
        # 19 live keys (k0's tombstone goes once delete.retention.ms has passed).
        got = wait_compacted(b, topic, written, KEYS - 1, tombstoned=[b"k0"])
        after = segment_bytes(b, topic)
        assert after < produced / 5, (produced, after)
        print(f"{len(written)} records of {produced} bytes -> {len(got)} records, {after} bytes")
        # Where the cleaner got to is kept for the restart (Kafka's cleaner-offset-checkpoint).
        ckpt = os.path.join(b.data_dir, "topics", f"{topic}-0", "cleaner-offset-checkpoint")
        with open(ckpt) as f:
            assert 0 < int(f.read()) <= max(written) + 1

        # The cleaned log is what a restart recovers, and appends go on after it.
        b.restart()
        assert read_from_zero(b, topic) == got
        more = produce_rounds(b, topic, 1)
        assert min(more) > max(written)


def test_kill_9_while_cleaning_loses_nothing():
    with conftest.running_broker(conftest.Broker, "kelp-compact-kill-",
                                 ["--log-cleaner-backoff-ms", "50"]) as b:
        topic = make_topic(b)
        written = produce_rounds(b, topic, 12, value_len=20000)
        rng = random.Random(7)
        for _ in range(3):
            # Somewhere in the next cleaning rounds.
            time.sleep(rng.uniform(0.0, 0.4))
            os.kill(b.proc.pid, signal.SIGKILL)
            b.proc.wait(10)
            b.proc = None
            b.start()
            check_compacted(read_from_zero(b, topic), written)
            written.update(produce_rounds(b, topic, 2, value_len=20000))
        wait_compacted(b, topic, written, KEYS)
