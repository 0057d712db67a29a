"""DeleteRecords and IncrementalAlterConfigs through confluent-kafka's AdminClient on the
durable log: the log start moves (and survives a restart), fetching below it is out of range,
topic config overrides change live and retention.bytes set at runtime deletes old segments."""

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

import conftest
from conftest import running_broker
from test_storage_local import LocalBroker

# These start their own Kelp on local storage; the local and memory passes run them already.
pytestmark = pytest.mark.skipif(conftest.STORAGE == "seaweedmq",
                                reason="local storage: covered by the local and memory passes")


@pytest.fixture
def broker_fast_retention():
    with running_broker(LocalBroker, "kelp-admin-", ["--retention-check-ms", "200"]) as b:
        yield b


def produce(bs, topic, n, size=100, per_batch=None):
    """n records; with per_batch, a flush after every per_batch records, so the log gets many
    small batches (a segment holds whole batches, so only small batches make small segments)."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=b"v" * size)
        p.poll(0)
        if per_batch and (i + 1) % per_batch == 0:
            assert p.flush(20) == 0
    assert p.flush(20) == 0


def low_high(bs, topic):
    c = Consumer({"bootstrap.servers": bs, "group.id": "wm", "enable.auto.commit": False})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def topic_configs(admin, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(10).items()}


def alter(admin, topic, *entries):
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(entries))
    return admin.incremental_alter_configs([res])[res].result(10)


def test_delete_records_moves_log_start_and_survives_restart(broker_fast_retention):
    b = broker_fast_retention
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    produce(b.bootstrap, topic, 100)
    assert low_high(b.bootstrap, topic) == (0, 100)
    out = admin.delete_records([TopicPartition(topic, 0, 40)])
    res = list(out.values())[0].result(10)
    assert res.low_watermark == 40
    assert low_high(b.bootstrap, topic) == (40, 100)
    # Beyond the high watermark is refused, and the log start does not move.
    with pytest.raises(KafkaException):
        list(admin.delete_records([TopicPartition(topic, 0, 500)]).values())[0].result(10)
    assert low_high(b.bootstrap, topic) == (40, 100)
    # Reading from the beginning starts at the new log start.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    first, deadline = None, time.time() + 15
    while first is None and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            first = m.offset()
    c.close()
    assert first == 40
    b.restart()
    assert low_high(b.bootstrap, topic) == (40, 100)


@pytest.fixture
def broker_small_segments():
    # segment.bytes below 1 MiB is refused as a topic config (Kafka's limit); the broker flag
    # (the default for every topic) may go lower, so segments here are 4 KiB.
    with running_broker(LocalBroker, "kelp-admin-",
                        ["--retention-check-ms", "200", "--segment-bytes", "4096"]) as b:
        yield b


def test_incremental_alter_configs_and_runtime_retention(broker_small_segments):
    b = broker_small_segments
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = f"iac-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    assert topic_configs(admin, topic)["retention.ms"] == "604800000"
    alter(admin, topic, ConfigEntry("retention.ms", "3600000",
                                    incremental_operation=AlterConfigOpType.SET))
    assert topic_configs(admin, topic)["retention.ms"] == "3600000"
    alter(admin, topic, ConfigEntry("retention.ms", None,
                                    incremental_operation=AlterConfigOpType.DELETE))
    assert topic_configs(admin, topic)["retention.ms"] == "604800000"
    with pytest.raises(KafkaException):
        alter(admin, topic, ConfigEntry("retention.ms", "soon",
                                        incremental_operation=AlterConfigOpType.SET))
    with pytest.raises(KafkaException):
        alter(admin, topic, ConfigEntry("no.such.config", "1",
                                        incremental_operation=AlterConfigOpType.SET))
    # ~60 KiB in 4 KiB segments, then cap the partition at 8 KiB: old segments go.
    produce(b.bootstrap, topic, 400, size=150, per_batch=10)
    assert low_high(b.bootstrap, topic) == (0, 400)
    seg_dir = os.path.join(b.data_dir, "topics", f"{topic}-0")
    before = [f for f in os.listdir(seg_dir) if f.endswith(".log")]
    assert len(before) >= 10, before
    alter(admin, topic, ConfigEntry("retention.bytes", "8192",
                                    incremental_operation=AlterConfigOpType.SET))
    deadline = time.time() + 15
    low = 0
    while time.time() < deadline:
        low, high = low_high(b.bootstrap, topic)
        if low > 0:
            break
        time.sleep(0.3)
    assert 0 < low < 400 and high == 400, (low, high)
    logs = [f for f in os.listdir(seg_dir) if f.endswith(".log")]
    total = sum(os.path.getsize(os.path.join(seg_dir, f)) for f in logs)
    assert total <= 8192 + 2 * 4096 + 4096, (total, logs)
