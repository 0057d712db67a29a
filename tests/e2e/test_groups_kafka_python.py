"""Consumer groups with kafka-python: static membership (a restarted static member within its
session timeout causes no rebalance) and the group admin APIs."""

import os
import select
import signal
import subprocess
import sys
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))


def start_static(bootstrap, topic, group, instance):
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "static_member.py"), bootstrap, topic, group, instance],
        stdout=subprocess.PIPE,
        text=True,
    )


def read_ready(proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            line = proc.stdout.readline()
            if line.startswith("READY"):
                _, gen, member, parts = line.split()
                return int(gen), member, parts
        if proc.poll() is not None:
            raise AssertionError(f"static member exited with {proc.returncode}")
    raise AssertionError("static member never got an assignment")


def kill(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def generation(c):
    return c._coordinator._generation.generation_id


def test_static_member_rejoin_causes_no_rebalance(broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 6, 1)])

    a = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        group_instance_id="static-a",
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
    )
    b = start_static(broker.bootstrap, topic, group, "static-b")
    procs = [b]
    try:
        deadline = time.monotonic() + 30
        # Poll a until both members share the partitions in one generation.
        while time.monotonic() < deadline:
            a.poll(timeout_ms=100)
            if a.assignment() and len(a.assignment()) < 6:
                break
        assert a.assignment() and len(a.assignment()) < 6, "a and b never shared the topic"
        gen_b, member_b, parts_b = read_ready(b)
        gen_a = generation(a)
        assert gen_a == gen_b
        parts_a = sorted(tp.partition for tp in a.assignment())

        # b crashes (no LeaveGroup) and comes back with the same instance id.
        kill(b)
        b2 = start_static(broker.bootstrap, topic, group, "static-b")
        procs.append(b2)
        gen_b2, member_b2, parts_b2 = read_ready(b2)
        assert member_b2 != member_b, "a rejoining static member gets a new member id"
        assert gen_b2 == gen_b, "no new generation"
        assert parts_b2 == parts_b, "same assignment"
        end = time.monotonic() + 2
        while time.monotonic() < end:
            a.poll(timeout_ms=100)
        assert generation(a) == gen_a
        assert sorted(tp.partition for tp in a.assignment()) == parts_a

        desc = admin.describe_groups([group])[group]
        assert desc["group_state"] == "Stable"
        instances = {m["group_instance_id"]: m["member_id"] for m in desc["members"]}
        assert instances["static-b"] == member_b2
    finally:
        for p in procs:
            kill(p)
        a.close()
        admin.close()


def test_group_admin_list_describe_delete(broker):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        p.send(topic, f"v{i}".encode(), partition=i % 2)
    p.flush()
    p.close()

    c = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    n = sum(1 for _ in c)
    assert n == 10
    c.commit()
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert listed[group]["group_state"] == "Stable"
    assert listed[group]["protocol_type"] == "consumer"
    offsets = admin.list_group_offsets(group)
    # kafka-python 3 answers {group: {TopicPartition: OffsetAndMetadata}}.
    assert {tp.partition: om.offset for tp, om in offsets[group].items()} == {0: 5, 1: 5}
    c.close()

    # Once the group is empty it can be deleted, offsets included.
    assert admin.delete_groups([group]) == {group: "OK"}
    assert group not in [g["group_id"] for g in admin.list_groups()]
    assert not admin.list_group_offsets(group).get(group)
    admin.close()
