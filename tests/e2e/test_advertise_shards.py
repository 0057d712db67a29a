"""--advertise-shards: each shard core is a broker node of its own (node id = shard index, port
= --shard-base-port + shard), named leader of the partitions it owns and coordinator of the
groups it owns, so real clients (librdkafka, kafka-python) send every Produce and Fetch straight
to the core that serves it. Checked: the Metadata and FindCoordinator answers follow Kelp's
placement (FNV-1a, as src/shard/routing.rs), every record comes back, and the broker's own
counter of cross-core hops (kelp_forwarded_items_total) stays 0 — while the same traffic
without the flag does hop, so the check can fail.

Each test starts its own Kelp (same storage as the pass) with a metrics endpoint; the rest of
the suite also runs against an --advertise-shards broker in scripts/test.sh
(KELP_ADVERTISE_SHARDS=1), which covers the Java, Go and Node clients.
"""

import os
import tempfile
import time
import uuid

import pytest

import conftest
from conftest import Broker, free_port, free_port_pair, metric_families, sample_total, scrape

PARTITIONS = 8
SHARDS = min(2, os.cpu_count() or 1)


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def owner(topic: str, partition: int, shards: int) -> int:
    return (fnv1a(topic.encode()) % shards + partition) % shards


def group_owner(group: str, shards: int) -> int:
    return fnv1a(group.encode()) % shards


def forwarded(mport):
    return sample_total(metric_families(scrape(mport)), "kelp_forwarded_items", "_total")


class _Started:
    def __init__(self, request, advertise):
        self.mport = free_port()
        self.dir = tempfile.TemporaryDirectory(prefix="kelp-shards-")
        args = ["--metrics-addr", f"127.0.0.1:{self.mport}"]
        self.base = None
        if advertise:
            self.base = free_port_pair()
            args += ["--advertise-shards", "--shard-base-port", str(self.base)]
        sw = (request.getfixturevalue("seaweed_cluster")
              if conftest.STORAGE == "seaweedmq" else None)
        # The conftest's own KELP_ADVERTISE_SHARDS switch must not add a second pair of flags.
        self.broker = Broker(self.dir.name, args, seaweed=sw, advertise_shards=False)
        self.broker.start()

    def close(self):
        self.broker.stop()
        self.broker.log.close()
        self.dir.cleanup()


@pytest.fixture
def started(request):
    made = []

    def start(advertise):
        s = _Started(request, advertise)
        made.append(s)
        return s

    yield start
    for s in made:
        if conftest.node_failed(request):
            print(f"--- kelp log ({s.broker.log_path}) ---\n{s.broker.log_tail()}")
        s.close()


def produce_and_consume(bootstrap, topic, group):
    """Creates the topic, produces with librdkafka and kafka-python, reads everything back
    with a two-member librdkafka consumer group; returns the topic metadata."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaProducer

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})
    n = 800
    for i in range(n):
        p.produce(topic, key=f"ck-{i}".encode(), value=b"v" * 50, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    futs = [kp.send(topic, key=f"kp-{i}".encode(), value=b"w" * 50, partition=i % PARTITIONS)
            for i in range(n)]
    for f in futs:
        f.get(timeout=30)
    kp.close()

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200,
            "session.timeout.ms": 10000}
    members = [Consumer(conf), Consumer(conf)]
    for c in members:
        c.subscribe([topic])
    seen, deadline = set(), time.monotonic() + 60
    try:
        while len(seen) < 2 * n and time.monotonic() < deadline:
            for c in members:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    seen.add(m.key())
        assert len(seen) == 2 * n, f"consumed {len(seen)} of {2 * n} records"
        desc = admin.describe_consumer_groups([group])[group].result(15)
        return admin.list_topics(topic, timeout=15), desc
    finally:
        for c in members:
            c.close()


def test_each_shard_is_a_node_and_clients_skip_the_hop(started):
    s = started(advertise=True)
    topic, group = f"adv-{uuid.uuid4().hex[:8]}", f"adv-g-{uuid.uuid4().hex[:8]}"
    md, desc = produce_and_consume(s.broker.bootstrap, topic, group)

    nid = s.broker.kafka_node_id  # shard i is node nid + i
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == \
        {nid + i: ("127.0.0.1", s.base + i) for i in range(SHARDS)}
    assert md.controller_id == nid
    leaders = {p: md.topics[topic].partitions[p].leader for p in range(PARTITIONS)}
    assert leaders == {p: nid + owner(topic, p, SHARDS) for p in range(PARTITIONS)}, leaders
    for p in range(PARTITIONS):
        assert md.topics[topic].partitions[p].replicas == [leaders[p]]
    want = group_owner(group, SHARDS)
    assert (desc.coordinator.id, desc.coordinator.port) == (nid + want, s.base + want), \
        desc.coordinator

    # Every produce, fetch and offset lookup reached its owning core directly.
    assert forwarded(s.mport) == 0


@pytest.mark.skipif(SHARDS < 2, reason="one core: nothing to hop to")
def test_without_the_flag_the_same_traffic_hops(started):
    s = started(advertise=False)
    topic, group = f"adv-{uuid.uuid4().hex[:8]}", f"adv-g-{uuid.uuid4().hex[:8]}"
    md, desc = produce_and_consume(s.broker.bootstrap, topic, group)
    assert [b.port for b in md.brokers.values()] == [s.broker.port]
    assert desc.coordinator.port == s.broker.port
    assert forwarded(s.mport) > 0


def test_shard_port_taken_is_a_clear_start_error():
    """A per-shard port held by someone else stops start-up with a message naming it."""
    import socket
    import subprocess

    if conftest.STORAGE == "seaweedmq":
        pytest.skip("the start-up error path does not depend on storage; checked on local")
    base = free_port_pair()
    with socket.socket() as hog:
        hog.bind(("127.0.0.1", base + SHARDS - 1))
        hog.listen(1)
        with tempfile.TemporaryDirectory(prefix="kelp-shards-") as d:
            b = Broker(d, ["--advertise-shards", "--shard-base-port", str(base)],
                       advertise_shards=False)
            args = b.args()
            b.log.close()
            r = subprocess.run(args, capture_output=True, timeout=60)
    assert r.returncode != 0
    err = (r.stdout + r.stderr).decode(errors="replace")
    assert f"127.0.0.1:{base + SHARDS - 1}" in err, err[-2000:]
