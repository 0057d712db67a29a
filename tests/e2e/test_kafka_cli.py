"""Apache Kafka's own kafka-topics tool (TopicCommand, Kafka 4.1) against Kelp: --create,
--list and --describe, which in Kafka 4 asks with DescribeTopicPartitions (KIP-966) and pages
through the partitions, __consumer_offsets shown as Kafka's internal topic, and --alter
--partitions (CreatePartitions): the new partitions take records at once and outlive a
restart; SeaweedMQ storage refuses it (SeaweedMQ re-partitions into an empty generation)."""

import re
import time
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


def test_kafka_topics_alter_partitions(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    topics_tool(broker, "--create", "--topic", topic, "--partitions", "2")
    args = ("--bootstrap-server", broker.bootstrap, "--alter", "--topic", topic, "--partitions", "6")
    if conftest.STORAGE == "seaweedmq":
        r = conftest.kafka_tool(TOPICS, *args)
        assert r.returncode != 0 and "re-partitions a topic" in r.stdout + r.stderr, r
        assert len(partition_lines(topics_tool(broker, "--describe", "--topic", topic), topic)) == 2
        return
    topics_tool(broker, *args[2:])
    assert len(partition_lines(topics_tool(broker, "--describe", "--topic", topic), topic)) == 6
    # Fewer than it has: refused, as Kafka refuses it.
    r = conftest.kafka_tool(TOPICS, *args[:-1], "3")
    assert r.returncode != 0 and "higher than the requested 3" in r.stdout + r.stderr, r

    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for part in range(6):
        p.produce(topic, value=f"p{part}".encode(), partition=part)
    assert p.flush(30) == 0
    if conftest.STORAGE == "local" and not broker.external:
        broker.restart()  # the new count is durable with the topic
        assert len(partition_lines(topics_tool(broker, "--describe", "--topic", topic),
                                   topic)) == 6
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"unused-{topic}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, part, 0) for part in range(6)])
    got, deadline = {}, time.monotonic() + 30
    try:
        while len(got) < 6 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()] = m.value()
    finally:
        c.close()
    assert got == {part: f"p{part}".encode() for part in range(6)}


def test_kafka_configs_describes_every_topic_config_as_kafka(broker):
    """kafka-configs --describe --all lists the 33 topic configs of Kafka 4.1 with their
    defaults; configs Kelp does not act on (delete.retention.ms, as Kafka Connect and Streams
    set them) are accepted at creation, values outside Kafka's limits refused."""
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    topics_tool(broker, "--create", "--topic", topic, "--partitions", "1",
                "--config", "cleanup.policy=compact", "--config", "delete.retention.ms=100",
                "--config", "min.compaction.lag.ms=5")
    r = conftest.kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap,
                            "--describe", "--all", "--entity-type", "topics",
                            "--entity-name", topic)
    assert r.returncode == 0, r.stdout + r.stderr
    entries = dict(re.findall(r"^\s+([a-z0-9.]+)=(\S*) sensitive=false", r.stdout, re.M))
    assert len(entries) == 33, r.stdout
    assert entries["delete.retention.ms"] == "100" and entries["cleanup.policy"] == "compact"
    assert entries["min.cleanable.dirty.ratio"] == "0.5" and entries["segment.index.bytes"] == \
        "10485760", r.stdout
    bad = conftest.kafka_tool(TOPICS, "--bootstrap-server", broker.bootstrap, "--create",
                              "--topic", topic + "-bad", "--config", "min.cleanable.dirty.ratio=2")
    assert bad.returncode != 0 and "min.cleanable.dirty.ratio" in bad.stdout + bad.stderr, bad


def test_kafka_configs_describes_broker_configs(broker):
    """kafka-configs --describe --all on a broker lists this node's configs under Kafka's
    names, read-only, with values from Kelp's flags (the e2e Kelp sets
    --group-initial-rebalance-delay-ms: a static config, with Kelp's default as its synonym),
    and --entity-default (the cluster-wide dynamic defaults) lists none, as a Kafka with no
    dynamic configs answers; without --all only dynamic configs show: none. Kafka 4.1 (316
    entries) passes it too."""
    node = sorted(broker_ids(broker))[0]
    def configs(*args):
        r = conftest.kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server",
                                broker.bootstrap, "--describe", "--entity-type", "brokers", *args)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout
    out = configs("--all", "--entity-name", str(node))
    entries = dict(re.findall(r"^\s+([a-z0-9.]+)=(\S*) sensitive=false", out, re.M))
    assert len(entries) > 60, out
    assert entries["num.partitions"] == "1" and entries["node.id"] == str(node), out
    assert entries["log.retention.hours"] == "168" and entries["message.max.bytes"] == "1048588"
    delay = conftest.REBALANCE_DELAY_MS
    assert f"group.initial.rebalance.delay.ms={delay} sensitive=false synonyms=" \
        f"{{STATIC_BROKER_CONFIG:group.initial.rebalance.delay.ms={delay}, " \
        "DEFAULT_CONFIG:group.initial.rebalance.delay.ms=3000}" in out, out
    dynamic = configs("--entity-name", str(node))
    assert "sensitive=" not in dynamic, dynamic
    defaults = configs("--entity-default")
    # (Kafka 4's KRaft format sets min.insync.replicas there: the same file passes against it.)
    assert broker.external or "sensitive=" not in defaults, defaults


def test_kafka_configs_alters_and_describes_group_configs(broker):
    """kafka-configs --entity-type groups (ConfigResource GROUP, KIP-848/KIP-932 group configs):
    --add-config on a group that does not exist yet (Kafka allows it), --describe --all lists
    every group config, the group's overrides from DYNAMIC_GROUP_CONFIG and the others'
    defaults from DEFAULT_CONFIG, --delete-config takes one back to its default, a value
    outside the broker's range and an unknown name are refused (INVALID_CONFIG) and change
    nothing; a restart keeps them (local storage: beside the topics; SeaweedMQ: on the
    filer). Kafka 4.1.1 passes it too.

    (Without --all, Kafka 4.1's tool first lists the groups with configs through
    ListConfigResources, which Kelp does not serve yet; 4.2's tool goes on without it.)"""
    group = f"gcfg-{uuid.uuid4().hex[:8]}"

    def tool(*args):
        return conftest.kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server",
                                   broker.bootstrap, "--entity-type", "groups",
                                   "--entity-name", group, *args)

    def described():
        """{name: (value, source)} of every group config."""
        r = tool("--describe", "--all")
        assert r.returncode == 0, r.stdout + r.stderr
        found = re.findall(r"^\s+([a-z.]+)=(\S*) sensitive=false synonyms=\{(\w+):\1=\2\}$",
                           r.stdout, re.M)
        return {name: (value, source) for name, value, source in found}, r.stdout

    def dynamic():
        every, out = described()
        return {k: v for k, (v, source) in every.items() if source == "DYNAMIC_GROUP_CONFIG"}

    r = tool("--alter", "--add-config",
             "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")
    assert r.returncode == 0 and f"Completed updating config for group {group}." in r.stdout, \
        r.stdout + r.stderr
    every, out = described()
    assert every["share.auto.offset.reset"] == ("earliest", "DYNAMIC_GROUP_CONFIG"), out
    assert every["share.record.lock.duration.ms"] == ("20000", "DYNAMIC_GROUP_CONFIG"), out
    assert every["consumer.session.timeout.ms"] == ("45000", "DEFAULT_CONFIG"), out
    assert every["share.isolation.level"] == ("read_uncommitted", "DEFAULT_CONFIG"), out
    assert dynamic() == {"share.auto.offset.reset": "earliest",
                         "share.record.lock.duration.ms": "20000"}

    r = tool("--alter", "--add-config", "share.record.lock.duration.ms=5000")
    assert r.returncode != 0 and "InvalidConfigurationException" in r.stdout + r.stderr and \
        "share.record.lock.duration.ms must be greater than or equal to " \
        "group.share.min.record.lock.duration.ms" in r.stdout + r.stderr, r
    r = tool("--alter", "--add-config", "share.auto.offset.reset=sometime")
    assert r.returncode != 0 and "InvalidConfigurationException" in r.stdout + r.stderr, r
    r = tool("--alter", "--add-config", "no.such.config=1")
    assert r.returncode != 0 and "Unknown group config name: no.such.config" in \
        r.stdout + r.stderr, r
    assert dynamic()["share.record.lock.duration.ms"] == "20000"

    r = tool("--alter", "--delete-config", "share.auto.offset.reset")
    assert r.returncode == 0, r.stdout + r.stderr
    assert dynamic() == {"share.record.lock.duration.ms": "20000"}
    assert described()[0]["share.auto.offset.reset"] == ("latest", "DEFAULT_CONFIG")

    if conftest.STORAGE in ("local", "seaweedmq") and not broker.external:
        broker.restart()
        assert dynamic() == {"share.record.lock.duration.ms": "20000"}


def test_kafka_python_alter_configs_legacy(broker):
    """kafka-python's admin alter_configs with incremental=False sends AlterConfigs (key 33,
    the form before IncrementalAlterConfigs), whose overrides replace the topic's: the client
    sends the other dynamic overrides it read along, so both survive."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    topic = f"legacy-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "1000"})])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                            configs={"retention.bytes": "123456"})],
                            incremental=False)
        out = topics_tool(broker, "--describe", "--topic", topic)
        configs = re.search(r"Configs: (.*)", out).group(1)
        assert "retention.bytes=123456" in configs and "retention.ms=1000" in configs, out
    finally:
        admin.close()


def test_log_dirs_leader_election_and_reassignment_tools(broker, tmp_path):
    """kafka-log-dirs --describe (DescribeLogDirs: the local log's directory and each
    partition's bytes, every partition once across the nodes; on memory and SeaweedMQ
    storage where the records live instead, sizes -1), kafka-leader-election (ElectLeaders: a lone replica needs no
    election) and kafka-reassign-partitions --list (ListPartitionReassignments: none) and
    --execute/--verify to the partition's own broker (AlterPartitionReassignments), whose
    output here is what Kafka 4.1's tools print against Kafka."""
    import json
    from confluent_kafka import Producer
    topic = f"dirs-{uuid.uuid4().hex[:8]}"
    topics_tool(broker, "--create", "--topic", topic, "--partitions", "2")
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for _ in range(100):
        p.produce(topic, value=b"x" * 1000, partition=0)
    assert p.flush(30) == 0

    r = conftest.kafka_tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server",
                            broker.bootstrap, "--describe", "--topic-list", topic)
    assert r.returncode == 0, r.stdout + r.stderr
    answer = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("{")))
    dirs = [d for b in answer["brokers"] for d in b["logDirs"]]
    assert all(d["error"] is None for d in dirs), r.stdout
    sizes = [(q["partition"], q["size"]) for d in dirs for q in d["partitions"]]
    assert sorted(q for q, _ in sizes) == [f"{topic}-0", f"{topic}-1"], r.stdout
    if conftest.STORAGE in ("memory", "seaweedmq") and not broker.external:
        # Not in a directory here: where the records live, sizes unknown.
        assert {d["logDir"] for d in dirs} <= {"memory", "seaweedmq:/topics/kafka"}, r.stdout
        assert {s for _, s in sizes} == {-1}, sizes
    else:
        assert all(d["logDir"].startswith("/") for d in dirs), r.stdout
        assert dict(sizes)[f"{topic}-0"] >= 100 * 1000 and dict(sizes)[f"{topic}-1"] == 0, sizes

    election = "org.apache.kafka.tools.LeaderElectionCommand"
    r = conftest.kafka_tool(election, "--bootstrap-server", broker.bootstrap, "--election-type",
                            "preferred", "--topic", topic, "--partition", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Valid replica already elected for partitions {topic}-0" in r.stdout, r.stdout
    r = conftest.kafka_tool(election, "--bootstrap-server", broker.bootstrap, "--election-type",
                            "unclean", "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    r = conftest.kafka_tool(election, "--bootstrap-server", broker.bootstrap, "--election-type",
                            "preferred", "--topic", topic + "-nope", "--partition", "0")
    assert r.returncode != 0 and "UnknownTopicOrPartitionException" in r.stdout + r.stderr, r

    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    r = conftest.kafka_tool(reassign, "--bootstrap-server", broker.bootstrap, "--list")
    assert r.returncode == 0 and "No partition reassignments found." in r.stdout, r

    # --execute (AlterPartitionReassignments) to where the partition is: done at once, as
    # Kafka finishes a reassignment to the current replicas; --verify agrees.
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10)
    leader = md.topics[topic].partitions[0].leader
    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [leader]}]}))
    r = conftest.kafka_tool(reassign, "--bootstrap-server", broker.bootstrap, "--execute",
                            "--reassignment-json-file", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Successfully started partition reassignment for {topic}-0" in r.stdout, r.stdout
    r = conftest.kafka_tool(reassign, "--bootstrap-server", broker.bootstrap, "--verify",
                            "--reassignment-json-file", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Reassignment of partition {topic}-0 is completed." in r.stdout, r.stdout
