"""Kelp on SeaweedMQ (--storage seaweedmq) against a real SeaweedFS started by
scripts/seaweedfs.sh: records produced through Kelp are in SeaweedMQ at the same offsets
(read back with smqctl's FetchMessage), survive a Kelp restart (empty cache), topics made in
SeaweedMQ show up in Kelp, group offsets sit where SeaweedFS's Go gateway keeps them, the Go
gateway reads what Kelp wrote, and a dead, hung or restarted mq broker costs retriable errors,
never an acknowledged record.

These run in the `--storage seaweedmq` pass of scripts/test.sh (KELP_STORAGE=seaweedmq), which
also runs every other e2e test on SeaweedMQ.
"""

import os
import signal
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
import kwire
from seaweed import smqctl

pytestmark = pytest.mark.skipif(
    conftest.STORAGE != "seaweedmq" or bool(conftest.EXTERNAL),
    reason="SeaweedMQ tests run in the --storage seaweedmq pass against the suite's Kelp",
)


def new_topic(bs, partitions=1):
    name = f"smq-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce_keyed(bs, topic, n, partitions, prefix="r", **conf):
    """n records round-robin over partitions; returns {(partition, offset): (key, value, ts)}."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, **conf})
    out, errors = {}, []

    def done(err, m):
        if err:
            errors.append(err)
        else:
            out[(m.partition(), m.offset())] = (m.key(), m.value(), m.timestamp()[1])

    base_ts = int(time.time() * 1000) - 60_000
    for i in range(n):
        p.produce(topic, key=f"{prefix}k{i}".encode(), value=f"{prefix}v{i}".encode() * 3,
                  partition=i % partitions, timestamp=base_ts + i, on_delivery=done)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    assert len(out) == n
    return out


def consume_all(bs, topic, partitions, expect, timeout=60):
    """Reads every partition from offset 0 until `expect` records: {(p, off): (k, v, ts)}."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, deadline = {}, time.time() + timeout
    try:
        while len(got) < expect and time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            key = (m.partition(), m.offset())
            assert key not in got, f"offset {key} delivered twice"
            got[key] = (m.key(), m.value(), m.timestamp()[1])
    finally:
        c.close()
    return got


def strip_ts(records):
    return {k: (key, value) for k, (key, value, _ts) in records.items()}


def smq_records(master, topic, partition, n):
    rows = smqctl(master, "fetch", "--topic", topic, "--partition", partition, "--offset", 0,
                  "--max", n)
    import base64

    return {
        r["offset"]: (base64.b64decode(r["key"]) if r["key"] else None,
                      base64.b64decode(r["value"]), r["ts_ns"] // 1_000_000)
        for r in rows if "offset" in r
    }


def test_records_land_in_seaweedmq_at_kafka_offsets_and_survive_restart(broker, seaweed):
    time.sleep(float(os.environ.get("XSLEEP", "0")))
    topic = new_topic(broker.bootstrap, 3)
    produced = produce_keyed(broker.bootstrap, topic, 300, 3)
    # SeaweedMQ itself holds each record at the offset the producer was told.
    for p in range(3):
        mine = {off: rec[:2] for (pp, off), rec in produced.items() if pp == p}
        assert {o: r[:2] for o, r in smq_records(seaweed.master, topic, p, len(mine)).items()} == mine
    # Through Kelp after a restart: the cache is empty, every read goes to SeaweedMQ. Records
    # carry their arrival time there, not the producer's (old) timestamp.
    broker.restart()
    back = consume_all(broker.bootstrap, topic, 3, len(produced))
    assert strip_ts(back) == strip_ts(produced)
    assert all(ts >= produced[k][2] for k, (_k, _v, ts) in back.items())
    # Offsets continue where SeaweedMQ is.
    more = produce_keyed(broker.bootstrap, topic, 30, 3, prefix="after")
    assert min(off for (_p, off) in more) == 100
    assert strip_ts(consume_all(broker.bootstrap, topic, 3, 330)) == strip_ts({**produced, **more})


def test_compressed_batches_are_stored_record_by_record(broker, seaweed):
    topic = new_topic(broker.bootstrap, 1)
    produced = produce_keyed(broker.bootstrap, topic, 200, 1, **{"compression.type": "zstd"})
    stored = smq_records(seaweed.master, topic, 0, 200)
    assert {o: r[:2] for o, r in stored.items()} == {off: rec[:2] for (_p, off), rec in
                                                     produced.items()}


def test_seaweedmq_topics_and_foreign_records_show_up(broker, seaweed):
    name = f"native-{uuid.uuid4().hex[:8]}"
    smqctl(seaweed.master, "create", "--topic", name, "--partitions", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline, parts = time.time() + 15, None
    while time.time() < deadline:
        md = admin.list_topics(timeout=10)
        if name in md.topics and md.topics[name].error is None:
            parts = len(md.topics[name].partitions)
            break
        time.sleep(0.3)
    assert parts == 2, "a topic created in SeaweedMQ must appear in Metadata"
    # Records another SeaweedMQ client published are read through Kelp...
    smqctl(seaweed.master, "publish", "--topic", name, "--partition", 1, "--count", 5,
           "--prefix", "native")
    got = consume_all(broker.bootstrap, name, 2, 5)
    assert sorted(v for (_k, v, _t) in got.values()) == [f"native-{i}".encode() for i in range(5)]
    assert all(p == 1 for (p, _o) in got)
    # ...and Kelp's own appends follow them at SeaweedMQ's offsets.
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    offs = []
    p.produce(name, value=b"kelp", partition=1, on_delivery=lambda e, m: offs.append(m.offset()))
    assert p.flush(30) == 0
    assert offs == [5]


def test_group_offsets_live_where_the_go_gateway_keeps_them(broker, seaweed):
    topic = new_topic(broker.bootstrap, 2)
    produce_keyed(broker.bootstrap, topic, 20, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 7, "meta-0"), TopicPartition(topic, 1, 3)],
             asynchronous=False)
    c.close()
    stored = smqctl(seaweed.master, "read-offset", "--group", group, "--topic", topic,
                    "--partition", 0)
    # (confluent-kafka sends the metadata string with its C terminator)
    assert stored[0]["offset"] == 7 and stored[0]["metadata"].rstrip("\x00") == "meta-0"
    broker.restart()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
    finally:
        c.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 7), (1, 3)]


def test_go_gateway_reads_what_kelp_wrote(broker, seaweed):
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    topic = new_topic(broker.bootstrap, 1)
    produced = produce_keyed(broker.bootstrap, topic, 50, 1)
    try:
        seaweed.gateway_start(9093)
    except Exception as e:  # noqa: BLE001 - the gateway is optional (the issue: "if it starts")
        pytest.skip(f"SeaweedFS's Go Kafka gateway did not start: {str(e)[-500:]}")
    try:
        got = consume_all(seaweed.gateway, topic, 1, len(produced), timeout=90)
    finally:
        seaweed.gateway_stop()
    assert {off: (k, v) for (_p, off), (k, v, _t) in got.items()} == {
        off: (k, v) for (_p, off), (k, v, _t) in produced.items()}


def raw_produce(bs, topic, values, timeout_ms, partition=0):
    """One Produce v9 (acks=all) on a fresh connection; returns (error_code, seconds taken)."""
    batch = kwire.record_batch(values)
    t0 = time.monotonic()
    with kwire.Conn(bs, timeout=timeout_ms / 1000 + 30) as c:
        r = c.roundtrip(0, 9, kwire.produce_body(9, topic, partition, batch, -1, timeout_ms))
        res = kwire.parse_produce(r, 9)
    return res[(topic, partition)]["error_code"], time.monotonic() - t0


def broker_pid(seaweed):
    with open(os.path.join(seaweed.dir, "broker.pid")) as f:
        return int(f.read().strip())


def wait_produce_ok(bs, topic, deadline_s=90, partition=0):
    deadline = time.time() + deadline_s
    code = None
    while time.time() < deadline:
        code, _ = raw_produce(bs, topic, [b"probe"], 5000, partition)
        if code == 0:
            return
        time.sleep(0.5)
    pytest.fail(f"produce did not recover within {deadline_s}s (last error {code})")


@pytest.mark.parametrize("fault", ["dead", "hung"])
def test_unreachable_broker_gives_retriable_errors_then_recovers(broker, seaweed, fault):
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    topic = new_topic(broker.bootstrap, 1)
    assert raw_produce(broker.bootstrap, topic, [b"before"], 10000)[0] == 0
    if fault == "dead":
        seaweed.stop_broker()
    else:
        pid = broker_pid(seaweed)
        os.kill(pid, signal.SIGSTOP)
    try:
        code, took = raw_produce(broker.bootstrap, topic, [b"during"], 2000)
        # REQUEST_TIMED_OUT (7) is retriable: clients try again.
        assert code == 7, f"expected REQUEST_TIMED_OUT, got {code}"
        assert took < 10, f"the produce took {took:.1f}s for a 2 s timeout"
        assert broker.alive()
    finally:
        if fault == "dead":
            seaweed.start_broker()
        else:
            os.kill(pid, signal.SIGCONT)
    wait_produce_ok(broker.bootstrap, topic)
    # "during" timed out while in flight: it may have landed (at least once, as in Kafka).
    got = consume_all(broker.bootstrap, topic, 1, 3, timeout=15)
    vals = [got[k][1] for k in sorted(got)]
    assert vals[0] == b"before"
    assert b"probe" in vals, vals


def test_broker_restart_under_load_loses_no_acknowledged_record(broker, seaweed):
    """A producer without retries writes, pauses until SeaweedMQ flushed and checkpointed
    (weed 4.48 keeps acknowledged records in broker memory until its 5 s flush and drops them
    on SIGTERM; docs/seaweedmq.md), then keeps writing while the mq broker is stopped and
    started again: produces wait, time out (retriable) or are acknowledged once SeaweedMQ took
    them. Every record the producer saw acknowledged is readable afterwards through a
    restarted Kelp, exactly once; unacknowledged ones may be there or not."""
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    topic = new_topic(broker.bootstrap, 2)
    acked, failed = [], []
    lock = threading.Lock()
    producing = threading.Event()
    stop = threading.Event()

    def run():
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0,
                      "enable.idempotence": False, "linger.ms": 2,
                      "message.timeout.ms": 60000, "request.timeout.ms": 20000})

        def done(err, m):
            with lock:
                (failed if err else acked).append(m.value())

        i = 0
        while not stop.is_set():
            if not producing.is_set():
                p.poll(0.05)
                continue
            p.produce(topic, value=f"v{i}".encode(), partition=i % 2, on_delivery=done)
            p.poll(0)
            i += 1
            time.sleep(0.004)
        p.flush(90)

    t = threading.Thread(target=run)
    t.start()
    try:
        producing.set()
        time.sleep(2)
        producing.clear()
        time.sleep(8)  # SeaweedMQ flushes (5 s) and checkpoints (2 s) what phase one wrote
        seaweed.stop_broker()
        producing.set()
        time.sleep(2)
        seaweed.start_broker()
        time.sleep(5)
    finally:
        stop.set()
        t.join(120)
    assert len(acked) > 300, f"only {len(acked)} acknowledged"
    broker.restart()  # read back from SeaweedMQ, not from Kelp's cache
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{topic}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, 0) for p in range(2)])
    seen, where = {}, {}
    deadline = time.time() + 60
    want = set(acked)
    while time.time() < deadline and not want <= set(seen):
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen[m.value()] = seen.get(m.value(), 0) + 1
            where.setdefault(m.value(), []).append((m.partition(), m.offset()))
    c.close()
    lost = want - set(seen)
    dup = [v for v in want if seen.get(v, 0) > 1]
    print(f"acknowledged {len(acked)}, failed {len(failed)}, read {sum(seen.values())}")
    assert not dup, f"{len(dup)} acknowledged records duplicated: {[(v, where[v]) for v in dup[:5]]}"
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"


def weed_bin():
    cache = os.environ.get("KELP_CACHE") or os.path.expanduser("~/.cache/kelp")
    return os.environ.get("WEED_BIN") or os.path.join(cache, "seaweedfs", "bin", "weed")


def test_partitions_on_several_brokers(broker, seaweed):
    """Three mq brokers share a topic's partitions: Kelp publishes each partition to its own
    leader (SeaweedFS's Go gateway sends everything to the first broker). When one broker
    stops, only its partitions answer REQUEST_TIMED_OUT (retriable) while the others keep
    taking records, and what they acknowledged is read back. (weed 4.48's balancer handed a
    stopped broker's partitions to no other broker within a minute here, nor served them again
    within two minutes of the broker's return, so leader moves are not checked end to end.)"""
    if seaweed.external:
        pytest.skip("needs the suite's own SeaweedFS")
    extra, logs = {}, []

    def start_broker(port):
        log = open(os.path.join(seaweed.dir, f"broker-{port}.log"), "ab")
        logs.append(log)
        return subprocess.Popen([weed_bin(), "mq.broker", "-ip=127.0.0.1", f"-port={port}",
                                 f"-master={seaweed.master}"], stdout=log, stderr=log)

    try:
        for port in (seaweed.baseport + 4, seaweed.baseport + 5):
            extra[f"127.0.0.1:{port}"] = start_broker(port)
        topic, leaders = None, {}
        deadline = time.time() + 60
        while len(set(leaders.values())) < 2 and time.time() < deadline:
            time.sleep(2)  # the new brokers register with the master and the balancer
            topic = new_topic(broker.bootstrap, 8)
            leaders = {a["partition"]: a["leader"]
                       for a in smqctl(seaweed.master, "lookup", "--topic", topic)}
        assert len(set(leaders.values())) >= 2, f"partitions not spread: {leaders}"
        victim = next((b for b in set(leaders.values()) if b in extra), None)
        assert victim, f"no extra broker leads a partition: {leaders}"
        before = produce_keyed(broker.bootstrap, topic, 160, 8, prefix="b")
        time.sleep(6)  # flushed by their leaders
        extra[victim].send_signal(signal.SIGTERM)
        extra[victim].wait(30)
        down = sorted(p for p, b in leaders.items() if b == victim)
        up = sorted(p for p, b in leaders.items() if b != victim)
        for p in up:
            assert raw_produce(broker.bootstrap, topic, [b"while-down"], 10000, p)[0] == 0
        code, took = raw_produce(broker.bootstrap, topic, [b"lost-leader"], 2000, down[0])
        assert code == 7 and took < 10, (code, took)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{topic}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        c.assign([TopicPartition(topic, p, 0) for p in up])
        want = {v for (p, _o), (_k, v, _t) in before.items() if p in up} | {b"while-down"}
        have, deadline = [], time.time() + 60
        while time.time() < deadline and len(have) < len(want) - 1 + len(up):
            m = c.poll(0.5)
            if m is not None and not m.error():
                have.append(m.value())
        c.close()
        assert want <= set(have), f"{len(want - set(have))} acknowledged records missing"
        assert have.count(b"while-down") == len(up)
    finally:
        for proc in extra.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for log in logs:
            log.close()
