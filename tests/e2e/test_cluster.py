"""Several Kelp nodes over one SeaweedMQ (two mq brokers): partitions spread over the nodes,
each led by one node at a time under a filer lease; clients follow NOT_LEADER_OR_FOLLOWER and
NOT_COORDINATOR to the new leader or coordinator when a node dies or restarts.

The test runs the Java client's idempotent producer (acks=all) and a consumer group of three
(one bootstrapped at each node) while one node is killed with SIGKILL and started again, then
while every node is restarted in turn (SIGTERM). It prints the figures docs/cluster.md quotes:
acknowledged records lost (must be 0), duplicates, the time from the kill until every
partition the dead node led takes records again, and until the group consumes again."""

import functools
import glob
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
import kwire
from conftest import require
from test_seaweedmq import extra_brokers, spread_topic

pytestmark = pytest.mark.skipif(conftest.STORAGE != "seaweedmq",
                                reason="several Kelp nodes share SeaweedMQ storage")

ROOT = pathlib.Path(__file__).resolve().parents[2]
JARS = pathlib.Path(os.environ.get("KELP_JARS", pathlib.Path.home() / ".cache/kelp/jars/clients"))
PARTITIONS = 12


def leaders(bs, topic):
    """{partition: leader node id} as Metadata from `bs` answers."""
    md = AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=10)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def brokers(bs):
    return sorted(AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).brokers)


def wait_for(what, ok, within):
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            if ok():
                return
        except Exception:  # noqa: BLE001 - a node restarting: not yet
            pass
        time.sleep(0.2)
    pytest.fail(f"{what} not within {within} s")


class Group:
    """Three consumers of one group, each bootstrapped at its own node, recording
    (id, partition, receive time) of everything they get."""

    def __init__(self, bootstraps, topic):
        self.got, self.lock, self.stop = [], threading.Lock(), threading.Event()
        gid = f"g-{topic}"
        # Daemons: a consumer whose close never returns fails the test (close() says so)
        # instead of keeping the interpreter, and so the whole suite, from exiting (seen once
        # in CI: pytest hung after its summary, one thread in rd_kafka_consumer_close).
        self.threads = [threading.Thread(target=self.run, args=(bs, topic, gid), daemon=True)
                        for bs in bootstraps]
        self.bootstraps = bootstraps
        for t in self.threads:
            t.start()

    def run(self, bs, topic, gid):
        c = Consumer({"bootstrap.servers": bs, "group.id": gid, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                      "fetch.wait.max.ms": 100,
                      # KELP_CLUSTER_DEBUG: the group client's own account too (stderr).
                      **({"debug": "cgrp"} if os.environ.get("KELP_CLUSTER_DEBUG") else {})})
        c.subscribe([topic])
        try:
            while not self.stop.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    with self.lock:
                        self.got.append((int(m.value()), m.partition(), time.time()))
        finally:
            c.close()

    def close(self):
        """Stops the consumers; returns the bootstraps of those whose close did not return
        within 30 s."""
        self.stop.set()
        for t in self.threads:
            t.join(30)
        return [bs for bs, t in zip(self.bootstraps, self.threads) if t.is_alive()]


def read_all(bs, topic):
    """Every record of the topic, from offset 0 of each partition: {id: count}."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"r-{topic}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    ends = {}
    for p in range(PARTITIONS):
        _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        ends[p] = hi
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    counts, pos = {}, {p: 0 for p in range(PARTITIONS)}
    deadline = time.time() + 90
    while time.time() < deadline and any(pos[p] < ends[p] for p in ends):
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        pos[m.partition()] = m.offset() + 1
        i = int(m.value())
        counts[i] = counts.get(i, 0) + 1
    c.close()
    assert all(pos[p] >= ends[p] for p in ends), f"read stopped short: {pos} of {ends}"
    return counts


def test_three_nodes_survive_a_kill_and_a_rolling_restart(broker, seaweed):
    require(shutil.which("java") is not None, "java")
    jars = glob.glob(str(JARS / "*.jar"))
    require(any("kafka-clients-4" in j for j in jars), f"kafka-clients 4.x jars in {JARS}")
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    join = ["--cluster-id", broker.cluster_id]
    with extra_brokers(seaweed, 1), \
            conftest.running_broker(conftest.Broker, "kelp-b-", join, seaweed=seaweed) as b, \
            conftest.running_broker(conftest.Broker, "kelp-c-", join, seaweed=seaweed) as c:
        nodes = [broker, b, c]
        ids = sorted(n.kafka_node_id for n in nodes)
        wait_for("three live nodes in Metadata", lambda: brokers(broker.bootstrap) == ids, 15)
        topic = f"cl-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        # Every node names the same leaders, each a live node that took its lease.
        wait_for("leaders agreed by every node",
                 lambda: len({tuple(sorted(leaders(n.bootstrap, topic).items()))
                              for n in nodes}) == 1
                 and set(leaders(broker.bootstrap, topic).values()) <= set(ids), 20)
        spread = leaders(broker.bootstrap, topic)
        per_node = {i: sum(1 for v in spread.values() if v == i) for i in ids}
        print(f"partitions per node: {per_node}")
        assert sum(1 for v in per_node.values() if v) >= 2, per_node

        group = Group([n.bootstrap for n in nodes], topic)
        work = tempfile.mkdtemp(prefix="kelp-cluster-")
        stop_file = os.path.join(work, "stop")
        # Files, not pipes: the producer's callbacks print on its I/O thread, and a full pipe
        # nobody reads until the end would stall the producer itself.
        out_f = open(os.path.join(work, "out"), "w+")
        err_f = open(os.path.join(work, "err"), "w+")
        producer = subprocess.Popen(
            ["java", "-cp", os.pathsep.join(jars), str(ROOT / "tests/java/ClusterProducer.java"),
             ",".join(n.bootstrap for n in nodes), topic, stop_file, "300"],
            stdout=out_f, stderr=err_f, text=True)
        try:
            time.sleep(6)
            # The extra node leading the most partitions dies without a goodbye.
            victim = max((b, c), key=lambda n: per_node[n.kafka_node_id])
            led = sorted(p for p, v in spread.items() if v == victim.kafka_node_id)
            t_kill = time.time()
            victim.proc.kill()
            victim.proc.wait(10)
            time.sleep(12)
            victim.start()  # same id and address: it waits out its old lease
            time.sleep(6)
            t_roll = time.time()
            for n in nodes:
                n.restart()
                time.sleep(4)
            t_rolled = time.time()
            time.sleep(4)
        finally:
            pathlib.Path(stop_file).touch()
            producer.wait(180)
            out_f.seek(0)
            err_f.seek(0)
            out, err = out_f.read(), err_f.read()
            out_f.close()
            err_f.close()
            shutil.rmtree(work, ignore_errors=True)
            if os.environ.get("KELP_CLUSTER_DEBUG"):
                keep = pathlib.Path(os.environ["KELP_CLUSTER_DEBUG"])
                keep.mkdir(parents=True, exist_ok=True)
                for n in nodes:
                    n.log.flush()
                    shutil.copy(n.log_path, keep / f"kelp-{n.kafka_node_id}.log")
                print(f"kill at {time.strftime('%H:%M:%S', time.gmtime(t_kill))}, "
                      f"victim {victim.kafka_node_id}")
        assert producer.returncode == 0, err[-4000:]
        if os.environ.get("KELP_CLUSTER_DEBUG"):
            print("--- producer stderr ---\n" + err[-20000:])
        acks, fails = {}, []
        for line in out.splitlines():
            f = line.split()
            if f[0] == "ACK":
                acks[int(f[1])] = (int(f[2]), int(f[3]), int(f[4]) / 1000)
            elif f[0] == "FAIL":
                fails.append(line)
        sent = int(out.strip().splitlines()[-1].split()[1])
        # Consumers catch up with everything acknowledged, then stop.
        wait_for("the group consumed every acknowledged record",
                 lambda: set(acks) <= {i for i, _p, _t in group.got}, 60)
        stuck = group.close()
        if stuck:
            gid = f"g-{topic}"
            logs = "\n".join(f"--- node {n.kafka_node_id} ---\n" + "\n".join(
                line for line in n.log_tail().splitlines() if gid in line or "group" in line)
                for n in nodes)
            pytest.fail(f"consumer close did not return within 30 s (bootstrapped at {stuck}): "
                        f"the group's coordinator left a request unanswered?\n{logs[-6000:]}")

        counts = read_all(broker.bootstrap, topic)
        lost = sorted(set(acks) - set(counts))
        dups = sum(n - 1 for n in counts.values() if n > 1)
        resumed = [min((t for (p, _o, t) in acks.values() if p == part and t > t_kill + 0.1),
                       default=float("inf")) - t_kill
                   for part in led]
        produce_back = max(resumed) if resumed else 0.0
        group_back = max(
            min((t for (i, p, t) in group.got if p == part and t > t_kill
                 and i in acks and acks[i][2] > t_kill), default=float("inf")) - t_kill
            for part in range(PARTITIONS))
        stalls_in_roll = 0.0
        for part in range(PARTITIONS):
            ts = sorted(t for (p, _o, t) in acks.values()
                        if p == part and t_roll <= t <= t_rolled + 4)
            stalls_in_roll = max([stalls_in_roll] + [y - x for x, y in zip(ts, ts[1:])])
        print(f"cluster figures: sent {sent}, acknowledged {len(acks)}, failed {len(fails)}, "
              f"lost {len(lost)}, duplicates {dups}, kill -> produce again "
              f"{produce_back:.1f} s (partitions {led}), kill -> group consumes again "
              f"{group_back:.1f} s, longest gap between a partition's acks during the rolling restart "
              f"{stalls_in_roll:.1f} s")
        for i in lost[:10]:
            part, off, t = acks[i]
            print(f"lost {i}: partition {part} offset {off}, acknowledged {t - t_kill:+.2f} s "
                  f"from the kill, {t - t_roll:+.2f} s from the rolling restart")
        assert not fails, fails[:5]
        assert dups == 0, f"{dups} duplicates from an idempotent producer"
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:10]}"
        assert produce_back < 30, produce_back
        assert group_back < 60, group_back


def produce_raw(bootstrap, topic, partition, batch):
    """Produce v9 of one batch (acks=all): (error code, base offset)."""
    with kwire.Conn(bootstrap, 15) as c:
        r = c.roundtrip(0, 9, kwire.produce_body(9, topic, partition, batch, -1))
        res = kwire.parse_produce(r, 9)[(topic, partition)]
    return res["error_code"], res["base_offset"]


def test_producer_state_moves_with_the_partition(broker, seaweed):
    """An idempotent producer's retry that reaches a partition's next leader after its leader
    died (kill -9) is answered as the duplicate it is (the original offset), not appended
    again: the dead leader's producer journal and SeaweedMQ's records tell the new one."""
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    join = ["--cluster-id", broker.cluster_id]
    with conftest.running_broker(conftest.Broker, "kelp-b-", join, seaweed=seaweed) as b:
        ids = sorted([broker.kafka_node_id, b.kafka_node_id])
        wait_for("two live nodes in Metadata", lambda: brokers(broker.bootstrap) == ids, 15)
        topic = f"ps-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        # 16 partitions: placement hashes (topic, partition) over the two nodes, and with 6
        # all of them landed on one node in 1 run of 32 (CI: "every partition led" failed).
        admin.create_topics([NewTopic(topic, 16, 1)])[topic].result(30)
        wait_for("every partition led", lambda: set(leaders(broker.bootstrap, topic).values()) <= set(ids)
                 and len(set(leaders(broker.bootstrap, topic).values())) == 2, 20)
        part = min(p for p, v in leaders(broker.bootstrap, topic).items() if v == b.kafka_node_id)
        pid = 7_000_000_000 + int(uuid.uuid4().int % 1_000_000)
        t0 = int(time.time() * 1000)
        first = kwire.record_batch([b"a", b"b", b"c"], base_timestamp=t0, producer_id=pid,
                                   producer_epoch=0, base_sequence=0)
        second = kwire.record_batch([b"d", b"e"], base_timestamp=t0 + 5, producer_id=pid,
                                    producer_epoch=0, base_sequence=3)
        assert produce_raw(b.bootstrap, topic, part, first) == (0, 0)
        assert produce_raw(b.bootstrap, topic, part, second) == (0, 3)
        b.proc.kill()
        b.proc.wait(10)

        def answered():
            return produce_raw(broker.bootstrap, topic, part, second)[0] == 0
        wait_for("the partition led again by the surviving node", answered, 30)
        # Both earlier batches are duplicates at their first offsets; the next one follows.
        assert produce_raw(broker.bootstrap, topic, part, second) == (0, 3)
        assert produce_raw(broker.bootstrap, topic, part, first) == (0, 0)
        third = kwire.record_batch([b"f"], base_timestamp=t0 + 9, producer_id=pid,
                                   producer_epoch=0, base_sequence=5)
        assert produce_raw(broker.bootstrap, topic, part, third) == (0, 5)
        gap = kwire.record_batch([b"g"], producer_id=pid, producer_epoch=0, base_sequence=9)
        assert produce_raw(broker.bootstrap, topic, part, gap)[0] == 45  # OUT_OF_ORDER_SEQUENCE
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{topic}",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, part, 0)])
        got, deadline = [], time.time() + 30
        while len(got) < 6 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
        time.sleep(1)
        m = c.poll(1)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
        c.close()
        assert got == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f"])), got


def test_partitions_are_led_next_to_their_seaweedmq_leader(broker, seaweed):
    """Nodes naming the mq broker on their host (--seaweedmq-colocated-broker) lead the
    partitions SeaweedMQ leads on that broker, so publishes stay on the host; a node naming
    none leads nothing while those nodes live."""
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    join = ["--cluster-id", broker.cluster_id]
    suite_broker = f"127.0.0.1:{seaweed.baseport + 3}"
    with extra_brokers(seaweed, 1) as extra:
        other = next(iter(extra))
        with conftest.running_broker(conftest.Broker, "kelp-b-",
                                     join + ["--seaweedmq-colocated-broker", suite_broker],
                                     seaweed=seaweed) as b, \
                conftest.running_broker(conftest.Broker, "kelp-c-",
                                        join + ["--seaweedmq-colocated-broker", other],
                                        seaweed=seaweed) as c:
            near = {suite_broker: b.kafka_node_id, other: c.kafka_node_id}
            ids = sorted([broker.kafka_node_id, b.kafka_node_id, c.kafka_node_id])
            wait_for("three live nodes in Metadata", lambda: brokers(broker.bootstrap) == ids, 15)
            topic, placed = spread_topic(
                broker.bootstrap, seaweed.master, 8,
                lambda a: {lead for lead, _f in a.values()} == set(near))
            want = {p: near[lead] for p, (lead, _f) in placed.items()}
            print(f"SeaweedMQ leaders {dict(sorted(placed.items()))}; Kafka leaders wanted {want}")
            wait_for("every partition led by the node on its SeaweedMQ leader's host",
                     lambda: all(leaders(n.bootstrap, topic) == want for n in (broker, b, c)), 30)
            for p in range(8):
                assert raw_produce_ok(want_bs(want[p], (broker, b, c)), topic, p)


def want_bs(node_id, nodes):
    return next(n.bootstrap for n in nodes if n.kafka_node_id == node_id)


def raw_produce_ok(bootstrap, topic, partition):
    return produce_raw(bootstrap, topic, partition, kwire.record_batch([b"near"]))[0] == 0


def test_nodes_advertising_shards_form_one_cluster(seaweed):
    """Two nodes with --advertise-shards over one SeaweedMQ: Metadata lists every shard of
    every live node as a broker, a partition's leader is the owning shard of the node that
    leads it, and a real client producing and consuming through those brokers gets every
    record back."""
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    shards = min(2, os.cpu_count() or 1)
    cluster = f"shards-{uuid.uuid4().hex[:6]}"
    sharded = functools.partial(conftest.Broker, advertise_shards=True)
    with conftest.running_broker(sharded, "kelp-s1-", ["--cluster-id", cluster, "--node-id", "1000"],
                                 seaweed=seaweed) as a, \
            conftest.running_broker(sharded, "kelp-s2-",
                                    ["--cluster-id", cluster, "--node-id", "2000"],
                                    seaweed=seaweed) as b:
        ids = sorted(base + s for base in (1000, 2000) for s in range(shards))
        wait_for("every shard of both nodes in Metadata",
                 lambda: brokers(a.bootstrap) == ids and brokers(b.bootstrap) == ids, 15)
        topic = f"sh-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        admin.create_topics([NewTopic(topic, 16, 1)])[topic].result(30)
        wait_for("leaders agreed by both nodes",
                 lambda: leaders(a.bootstrap, topic) == leaders(b.bootstrap, topic)
                 and set(leaders(a.bootstrap, topic).values()) <= set(ids), 20)
        led = leaders(a.bootstrap, topic)
        from test_advertise_shards import owner
        for p, leader in led.items():
            base = 1000 if leader < 2000 else 2000
            assert leader == base + owner(topic, p, shards), (p, leader)
        # 16 partitions: both nodes lead some (all on one: 2 in 65,536).
        assert {1000 if v < 2000 else 2000 for v in led.values()} == {1000, 2000}, led
        prod = Producer({"bootstrap.servers": a.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
        sent = [f"r{i}".encode() for i in range(800)]
        for i, v in enumerate(sent):
            prod.produce(topic, value=v, partition=i % 16)
        assert prod.flush(60) == 0
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}",
                      "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
        c.subscribe([topic])
        got, deadline = [], time.time() + 60
        while len(got) < len(sent) and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert sorted(got) == sorted(sent), f"{len(got)} of {len(sent)} records back"


def test_transactions_need_a_single_node(broker, seaweed):
    """Transactions run while one Kelp node is live over the SeaweedMQ; while two are, a
    transactional producer is refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients
    take as fatal): its coordinator could not have markers written on partitions the other
    node leads. Once the second node left, they run again."""
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    from confluent_kafka import KafkaException
    topic = f"tx1-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    join = ["--cluster-id", broker.cluster_id]
    with conftest.running_broker(conftest.Broker, "kelp-t-", join, seaweed=seaweed) as b:
        ids = sorted([broker.kafka_node_id, b.kafka_node_id])
        wait_for("two live nodes in Metadata", lambda: brokers(broker.bootstrap) == ids, 15)
        p = Producer({"bootstrap.servers": broker.bootstrap,
                      "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
        with pytest.raises(KafkaException) as e:
            p.init_transactions(15)
        assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(e.value) or \
            "authoriz" in str(e.value).lower(), e.value
        assert "transactions need a single Kelp node" in b.log_tail() + broker.log_tail()
    wait_for("one live node", lambda: brokers(broker.bootstrap) == [broker.kafka_node_id], 30)
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=str(i).encode(), partition=i % 2)
    p.commit_transaction(30)
