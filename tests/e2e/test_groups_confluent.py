"""Consumer groups with librdkafka (confluent-kafka): assignment, exactly-once consumption
across the group, rebalance on leave, committed offsets, resume from them."""

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6


def create_topic(bootstrap, name, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    for f in fs.values():
        f.result(timeout=10)


def produce(bootstrap, topic, start, count):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        # Round-robin over partitions explicitly so every partition gets data.
        p.produce(topic, value=f"m{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(20) == 0


def consumer(bootstrap, group, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    }
    conf.update(extra)
    return Consumer(conf)


class Worker(threading.Thread):
    """Polls one consumer until told to stop; records messages and assignments."""

    def __init__(self, c, topic):
        super().__init__(daemon=True)
        self.c = c
        self.topic = topic
        self.got = []
        self.assigned = set()
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()

    def on_assign(self, c, parts):
        with self.lock:
            self.assigned = {p.partition for p in parts}

    def on_revoke(self, c, parts):
        # Commit what was processed before partitions move, so nothing is read twice.
        try:
            c.commit(asynchronous=False)
        except Exception:
            pass
        with self.lock:
            self.assigned = set()

    def run(self):
        self.c.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        while not self.stop_flag.is_set():
            m = self.c.poll(0.1)
            if m is None or m.error():
                continue
            with self.lock:
                self.got.append((m.partition(), m.offset(), m.value().decode()))
            self.c.commit(message=m, asynchronous=False)

    def finish(self):
        self.stop_flag.set()
        self.join(10)
        self.c.close()


def wait_until(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def all_values(workers):
    out = []
    for w in workers:
        with w.lock:
            out.extend(v for _, _, v in w.got)
    return out


def test_group_assignment_exactly_once_and_rebalance_on_leave(broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 600)

    workers = [Worker(consumer(broker.bootstrap, group), topic) for _ in range(3)]
    for w in workers:
        w.start()

    def balanced():
        sets = [w.assigned for w in workers]
        return all(sets) and sum(len(s) for s in sets) == PARTITIONS

    wait_until(balanced, 30, "three consumers to share the partitions")
    sets = [w.assigned for w in workers]
    assert set().union(*sets) == set(range(PARTITIONS))
    assert sum(len(s) for s in sets) == PARTITIONS, f"overlapping assignments {sets}"

    wait_until(lambda: len(all_values(workers)) >= 600, 30, "600 messages")
    vals = all_values(workers)
    assert sorted(vals) == sorted(f"m{i}" for i in range(600)), "each message exactly once"

    # One consumer leaves (close sends LeaveGroup): the other two take over everything.
    leaver = workers.pop()
    leaver.finish()
    wait_until(
        lambda: set().union(*[w.assigned for w in workers]) == set(range(PARTITIONS))
        and sum(len(w.assigned) for w in workers) == PARTITIONS,
        30,
        "the remaining two to own all partitions",
    )
    produce(broker.bootstrap, topic, 600, 120)
    wait_until(lambda: len(all_values(workers)) + len(leaver.got) >= 720, 30, "120 more")
    vals = all_values(workers) + [v for _, _, v in leaver.got]
    assert sorted(vals) == sorted(f"m{i}" for i in range(720))
    for w in workers:
        w.finish()


def test_committed_offsets_fetch_and_resume(broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 60)

    c = consumer(broker.bootstrap, group)
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 60 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
    assert len(got) == 60
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert {tp.partition: tp.offset for tp in committed} == {p: 10 for p in range(PARTITIONS)}
    c.close()

    produce(broker.bootstrap, topic, 60, 12)
    c2 = consumer(broker.bootstrap, group)
    c2.subscribe([topic])
    got2 = []
    deadline = time.monotonic() + 30
    while len(got2) < 12 and time.monotonic() < deadline:
        m = c2.poll(0.2)
        if m is not None and not m.error():
            got2.append(m.value().decode())
    # Nothing before the committed offsets comes back.
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        m = c2.poll(0.2)
        if m is not None and not m.error():
            got2.append(m.value().decode())
    assert sorted(got2) == sorted(f"m{i}" for i in range(60, 72))
    c2.commit(asynchronous=False)
    c2.close()

    if broker.storage == "memory":
        pytest.skip("restart survival of committed offsets needs the durable log (--storage memory)")
    broker.restart()
    c3 = consumer(broker.bootstrap, group)
    committed = c3.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert {tp.partition: tp.offset for tp in committed} == {p: 12 for p in range(PARTITIONS)}
    c3.close()
