"""KIP-848 consumer groups (group.protocol=consumer: the broker assigns partitions, members
only heartbeat) with real clients on the local, SeaweedMQ (offsets on the filer) and
--advertise-shards (coordinator routing) passes; the memory pass would repeat the local one:

- the Java client 4.x (tests/java/ConsumerGroupProtocol.java) with each server-side assignor
  (uniform on each of those passes, range on the local one): two members share a topic without a partition ever held twice, the admin
  client describes and lists the group as Kafka's, committed offsets match the end offsets, a
  leaving member's partitions go to the other, and a broker-resolved regex subscription picks
  up a topic created later;
- librdkafka (confluent-kafka 2.x, `group.protocol=consumer`): three members, one leaving
  without committing, every record read by the two left, who end up with all partitions;
- Kafka's kafka-consumer-groups tool describes the group's members.

franz-go's own KIP-848 tests run in test_go_franz_kgo.py."""

import glob
import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import require

pytestmark = pytest.mark.skipif(conftest.STORAGE == "memory",
                                reason="the coordinator's: local, SeaweedMQ, advertise passes")


def java_848(tmp_path, bootstrap, prefix, assignor, n):
    import shutil
    require(shutil.which("java") is not None and shutil.which("javac") is not None, "java, javac")
    jars = sorted(glob.glob(str(conftest.CLIENT_JARS / "*.jar")))
    require(any("kafka-clients-4" in j for j in jars), "kafka-clients 4.x jars")
    cp = os.pathsep.join(jars)
    classes = tmp_path / "classes"
    classes.mkdir(exist_ok=True)
    comp = subprocess.run(["javac", "-d", str(classes), "-cp", cp,
                           str(conftest.ROOT / "tests/java/ConsumerGroupProtocol.java")],
                          capture_output=True, text=True, timeout=180)
    assert comp.returncode == 0, f"javac failed:\n{comp.stdout}\n{comp.stderr}"
    return subprocess.run(
        ["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", os.pathsep.join([str(classes), cp]), "ConsumerGroupProtocol", bootstrap, prefix,
         assignor, str(n)],
        capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_java_consumer_group_protocol(broker, tmp_path, assignor):
    if assignor == "range" and (conftest.STORAGE != "local" or conftest.ADVERTISE_SHARDS):
        # The assignors are the coordinator's, not the storage engine's: once is enough.
        pytest.skip("the range assignor runs on the local pass")
    prefix = f"k848-{assignor}-{uuid.uuid4().hex[:8]}"
    out = java_848(tmp_path, broker.bootstrap, prefix, assignor, 3000)
    ok = [line for line in out.stdout.splitlines() if line.startswith("OK ")]
    assert out.returncode == 0 and len(ok) == 4, (out.stdout[-3000:], out.stderr[-3000:])


def test_librdkafka_consumer_protocol_hands_a_leaving_members_partitions_over(broker):
    topic, group = f"k848-rd-{uuid.uuid4().hex[:8]}", f"k848-rdg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 6, 1)], operation_timeout=10).values():
        f.result(timeout=10)
    n = 3000
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 6)
    assert p.flush(20) == 0

    def member(name):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "group.protocol": "consumer", "client.id": name,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        return c

    # Three members share the topic; the third leaves without committing: its partitions go
    # to the other two, who read them from the start (nothing committed), so every record is
    # read and the two end up holding all six partitions between them, none twice.
    members = {name: member(name) for name in ("a", "b", "c")}
    seen = {}

    def poll(name, c):
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None and name != "c":
            seen[msg.value()] = name
            try:
                c.commit(msg, asynchronous=False)
            except KafkaException as e:
                # A commit racing the member's move to a new epoch is refused (Kafka too,
                # before 4.3); the record may be read again, which the test allows.
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    raise

    try:
        deadline = time.time() + 60
        while time.time() < deadline and not all(m.assignment() for m in members.values()):
            for name, c in members.items():
                poll(name, c)
        assert all(m.assignment() for m in members.values()), \
            {k: m.assignment() for k, m in members.items()}
        members.pop("c").close()
        deadline = time.time() + 90
        while time.time() < deadline:
            for name, c in members.items():
                poll(name, c)
            held = sum(len(c.assignment()) for c in members.values())
            if len(seen) == n and held == 6:
                break
        assert len(seen) == n, f"read {len(seen)} of {n}"
        parts = [{tp.partition for tp in c.assignment()} for c in members.values()]
        assert sum(len(s) for s in parts) == 6 and not (parts[0] & parts[1]), parts

        # Kafka's own tool describes the group (ConsumerGroupDescribe) as against Kafka.
        if conftest.KAFKA_JARS.is_dir():
            r = conftest.kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                                    "--bootstrap-server", broker.bootstrap, "--describe",
                                    "--group", group, "--members")
            assert r.returncode == 0, r.stderr[-2000:]
            # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
            rows = [line.split() for line in r.stdout.splitlines() if line.startswith(group)]
            assert sorted(row[3] for row in rows) == ["a", "b"], r.stdout
            assert sum(int(row[4]) for row in rows) == 6, r.stdout
    finally:
        for c in members.values():
            c.close()
