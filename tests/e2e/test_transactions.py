"""Transactions (KIP-98) with real clients: confluent-kafka's transactional producer commits
and aborts, a read_committed consumer sees exactly the committed records (a read_uncommitted
one sees everything), a consume-transform-produce loop commits its input offsets in its
transactions (send_offsets_to_transaction), a second producer with the same transactional id
fences the first, a transaction left open is aborted at its timeout, and with durable storage
an open transaction survives kill -9 (its records stay invisible to read_committed readers
until the coordinator aborts it at its timeout).

Transactions run on every engine. On SeaweedMQ, which keeps records rather than batches, a
transaction's records and markers come back from SeaweedMQ as batches of their producer, and a
Kelp that starts again reads the partitions' transaction state back (the kill -9 test reads
below the cache there: the restarted Kelp's cache is empty)."""

import glob
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import require

pytestmark = pytest.mark.skipif(bool(conftest.EXTERNAL), reason="checks Kelp's own transactions")

TXN_ENGINES = ("memory", "local", "seaweedmq")
DURABLE = ("local", "seaweedmq")


def new_topic(bootstrap, partitions=3):
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def producer(bootstrap, txn_id, **more):
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "linger.ms": 5, **more})


def commit_values(bootstrap, topic, prefix, n):
    """One transaction of a fresh transactional producer: values `prefix0`.. `prefix{n-1}`."""
    p = producer(bootstrap, f"{prefix}-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"{prefix}{i}".encode())
    p.commit_transaction(30)


def consume_all(bootstrap, topic, isolation, expect=None, timeout=30):
    """Every record value of `topic` a fresh consumer with `isolation` reads (until `expect`
    values arrived, or the partitions' ends were reached and nothing came for 3 s)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe([topic])
    got, idle_since, deadline = [], time.time(), time.time() + timeout
    while time.time() < deadline:
        m = c.poll(0.3)
        if m is None:
            if expect is None and got and time.time() - idle_since > 3:
                break
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(m.error())
        got.append(m.value().decode())
        idle_since = time.time()
        if expect is not None and len(got) >= expect:
            break
    c.close()
    return got


@pytest.mark.skipif(conftest.STORAGE not in TXN_ENGINES, reason="transactions")
def test_commit_and_abort_with_a_read_committed_consumer(broker):
    bs = broker.bootstrap
    topic = new_topic(bs)
    p = producer(bs, f"tx-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    for batch, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(200):
            p.produce(topic, key=str(i).encode(), value=f"{batch}{i}".encode())
        if commit:
            p.commit_transaction(30)
        else:
            # Written first, so the abort has something to drop (librdkafka would purge
            # unsent messages instead).
            assert p.flush(30) == 0
            p.abort_transaction(30)
    committed = consume_all(bs, topic, "read_committed", expect=400)
    assert sorted(committed) == sorted([f"a{i}" for i in range(200)] + [f"c{i}" for i in range(200)])
    everything = consume_all(bs, topic, "read_uncommitted", expect=600)
    assert len(everything) == 600 and any(v.startswith("b") for v in everything)
    assert broker.alive()


@pytest.mark.skipif(conftest.STORAGE not in TXN_ENGINES, reason="transactions")
def test_consume_transform_produce_commits_offsets_in_the_transaction(broker):
    """The exactly-once loop: read input, write output and the input offsets in one
    transaction; an aborted round leaves neither output nor offsets behind."""
    bs = broker.bootstrap
    src, dst = new_topic(bs, 2), new_topic(bs, 2)
    seed = Producer({"bootstrap.servers": bs})
    for i in range(100):
        seed.produce(src, key=str(i).encode(), value=f"v{i}".encode())
    assert seed.flush(30) == 0
    group = f"etl-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe([src])
    p = producer(bs, f"etl-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    done, rounds, deadline = 0, 0, time.time() + 60
    while done < 100 and time.time() < deadline:
        msgs = [m for m in c.consume(50, 1.0) if not m.error()]
        if not msgs:
            continue
        rounds += 1
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, key=m.key(), value=m.value().upper())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        if rounds == 1:
            # The first round is thrown away: its input is read again after a rewind.
            p.abort_transaction(30)
            committed = c.committed(c.assignment(), 10)
            assert all(tp.offset < 0 for tp in committed), committed
            for tp in c.assignment():
                c.seek(TopicPartition(tp.topic, tp.partition, 0))
            continue
        p.commit_transaction(30)
        done += len(msgs)
    c.close()
    assert done == 100
    out = consume_all(bs, dst, "read_committed", expect=100)
    assert sorted(out) == sorted(f"V{i}" for i in range(100))
    # The group's committed offsets are the input's end.
    check = Consumer({"bootstrap.servers": bs, "group.id": group})
    offs = check.committed([TopicPartition(src, 0), TopicPartition(src, 1)], 10)
    check.close()
    assert sum(tp.offset for tp in offs) == 100, offs


@pytest.mark.skipif(conftest.STORAGE not in TXN_ENGINES, reason="transactions")
def test_a_second_producer_fences_the_first(broker):
    bs = broker.bootstrap
    topic = new_topic(bs, 1)
    txn_id = f"zombie-{uuid.uuid4().hex[:6]}"
    old = producer(bs, txn_id)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, value=b"from-the-zombie")
    old.flush(10)
    new = producer(bs, txn_id)
    new.init_transactions(30)  # aborts the zombie's open transaction
    new.begin_transaction()
    new.produce(topic, value=b"from-the-new-one")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(10)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), e.value
    assert consume_all(bs, topic, "read_committed", expect=1) == ["from-the-new-one"]


@pytest.mark.skipif(conftest.STORAGE not in TXN_ENGINES, reason="transactions")
def test_an_open_transaction_is_aborted_at_its_timeout(broker):
    bs = broker.bootstrap
    topic = new_topic(bs, 1)
    p = producer(bs, f"slow-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 8000})
    opened = time.time()
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"lost{i}".encode())
    p.flush(10)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"after")
    plain.flush(10)
    # While open, read_committed readers stop before it.
    assert consume_all(bs, topic, "read_committed", timeout=3) == []
    assert time.time() - opened < 8, "the check above ran past the timeout"
    time.sleep(max(0.0, opened + 9 - time.time()))
    assert consume_all(bs, topic, "read_committed", expect=1) == ["after"]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


@pytest.mark.skipif(conftest.STORAGE not in DURABLE, reason="durable transactions")
def test_an_open_transaction_survives_kill_9_and_is_aborted(broker):
    bs = broker.bootstrap
    topic = new_topic(bs, 1)
    commit_values(bs, topic, "kept", 50)
    p = producer(bs, f"open-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 4000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, value=f"open{i}".encode())
    p.flush(10)
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait(10)
    broker.start()
    # The log holds the open transaction's records; read_committed readers do not see them,
    # before its abort (the coordinator read its state back) or after it.
    assert sorted(consume_all(bs, topic, "read_committed", timeout=6)) == sorted(
        f"kept{i}" for i in range(50))
    time.sleep(5)
    # A transaction committed after the abort: read_committed readers get past the aborted
    # records to it, and skip every one of them.
    commit_values(bs, topic, "late", 10)
    want = sorted([f"kept{i}" for i in range(50)] + [f"late{i}" for i in range(10)])
    assert sorted(consume_all(bs, topic, "read_committed", expect=60)) == want
    assert len(consume_all(bs, topic, "read_uncommitted", expect=80)) == 80
    # Once more after a restart, every record read back from the engine (SeaweedMQ: nothing
    # in the cache; local: the log recovered).
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait(10)
    broker.start()
    assert sorted(consume_all(bs, topic, "read_committed", expect=60)) == want


@pytest.mark.skipif(conftest.STORAGE not in TXN_ENGINES, reason="transactions")
def test_java_transactional_producer_and_read_committed_consumer(broker):
    """Apache Kafka's Java client: commit, abort, a zombie fenced by a new producer with the
    same transactional.id, read_committed and read_uncommitted consumers
    (tests/java/TransactionalRoundTrip.java)."""
    require(shutil.which("java") is not None, "java")
    jars = glob.glob(str(conftest.CLIENT_JARS / "*.jar"))
    require(any("kafka-clients-4" in j for j in jars), "kafka-clients 4.x jars")
    topic = f"jtxn-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        ["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", os.pathsep.join(jars),
         str(conftest.ROOT / "tests/java/TransactionalRoundTrip.java"), broker.bootstrap, topic],
        capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-4000:]
    assert "OK committed=210 uncommitted=261 fenced=true" in out.stdout, out.stdout
    # Apache Kafka's kafka-transactions tool sees the id (ListTransactions,
    # DescribeTransactions).
    r = conftest.kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                            broker.bootstrap, "list")
    assert r.returncode == 0 and f"{topic}-txn" in r.stdout, r.stdout + r.stderr[-2000:]
    r = conftest.kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                            broker.bootstrap, "describe", "--transactional-id", f"{topic}-txn")
    assert r.returncode == 0 and "CompleteCommit" in r.stdout, r.stdout + r.stderr[-2000:]
    # Transactions v2 (KIP-890): the client saw transaction.version 2 finalized, so every
    # EndTxn moved the epoch on: three transactions (3), the zombie's abort when the second
    # producer took over (4), its InitProducerId (5) and its transaction (6). v1 ends at 2.
    row = dict(zip(r.stdout.splitlines()[0].split(), r.stdout.splitlines()[1].split()))
    assert row["ProducerEpoch"] == "6", r.stdout
    r = conftest.kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server",
                            broker.bootstrap, "describe-producers", "--topic", topic,
                            "--partition", "0")
    assert r.returncode == 0 and "ProducerId" in r.stdout, r.stdout + r.stderr[-2000:]
