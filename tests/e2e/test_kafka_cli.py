"""Apache Kafka's own kafka-topics tool (TopicCommand, Kafka 4.1) against Kelp: --create,
--list and --describe, which in Kafka 4 asks with DescribeTopicPartitions (KIP-966) and pages
through the partitions, and __consumer_offsets shown as Kafka's internal topic."""

import re
import uuid

import conftest

TOPICS = "org.apache.kafka.tools.TopicCommand"


def topics_tool(b, *args):
    r = conftest.kafka_tool(TOPICS, "--bootstrap-server", b.bootstrap, *args)
    assert r.returncode == 0, f"kafka-topics {args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def partition_lines(out, topic):
    return re.findall(rf"Topic: {re.escape(topic)}\tPartition: (\d+)\tLeader: (\d+)\t"
                      r"Replicas: (\d+)\tIsr: (\d+)", out)


def test_kafka_topics_create_list_describe(broker):
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    topics_tool(broker, "--create", "--topic", topic, "--partitions", "5",
                "--config", "retention.ms=3600000")
    assert topic in topics_tool(broker, "--list").split()
    # Internal topics are left out on request, as against Kafka.
    assert "__consumer_offsets" not in topics_tool(broker, "--list", "--exclude-internal").split()

    out = topics_tool(broker, "--describe", "--topic", topic)
    head = re.search(rf"Topic: {re.escape(topic)}\tTopicId: (\S+)\tPartitionCount: (\d+)\t"
                     r"ReplicationFactor: (\d+)\tConfigs: (.*)", out)
    assert head, out
    assert head.group(2, 3) == ("5", "1"), out
    assert "retention.ms=3600000" in head.group(4), out
    parts = partition_lines(out, topic)
    assert [int(p[0]) for p in parts] == list(range(5)), out
    # One node answers for every partition, as its only replica and in-sync replica.
    assert all(p[1] == p[2] == p[3] for p in parts), out
    assert {p[1] for p in parts} <= {str(n) for n in broker_ids(broker)}, out

    # Pages of 2 partitions: the tool follows DescribeTopicPartitions' cursor to the end.
    paged = topics_tool(broker, "--describe", "--topic", topic,
                        "--partition-size-limit-per-response", "2")
    assert partition_lines(paged, topic) == parts, paged

    internal = topics_tool(broker, "--describe", "--topic", "__consumer_offsets")
    assert "PartitionCount: 50" in internal, internal
    assert len(partition_lines(internal, "__consumer_offsets")) == 50, internal


def broker_ids(b):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).brokers
