"""Share groups (KIP-932) with the real Java KafkaShareConsumer of kafka-clients 4.2.x
(tests/java/ShareConsume.java) and Apache Kafka's kafka-share-groups tool (ShareGroupCommand of
kafka-tools 4.2.x), both from ${KELP_CACHE:-~/.cache/kelp}/jars/clients-share
(scripts/install-deps.sh):

  a. two members in one group, implicit acknowledgement, share a 4-partition topic: every record
     is delivered once (delivery count 1), none to both; kafka-share-groups --list / --describe
     (--members, --state, offsets) shows the group, its members and their assignments, and the
     partitions' start offsets and lag;
  b. explicit acknowledgement: released records come back (delivery count 2) and are accepted,
     rejected ones never come back; a later member of the group gets nothing old, only new records;
  c. a member that dies (Runtime.halt) holding acquired records: another member gets them again,
     delivery count 2, once the broker notices the dropped connections (at worst when the
     group's 15 s record lock runs out);
  d. the group's share state is durable: after a broker restart, records acknowledged before it
     are not delivered again, released ones are (delivery count 2), new ones are (count 1).

The module skips unless the broker advertises ShareGroupHeartbeat (76) and ShareFetch (78) v1 in
ApiVersions, so it runs against Kafka 4.2 and a Kelp that serves share groups, and skips on a Kelp
that does not yet. Validated against Apache Kafka 4.2.1:

  KAFKA_VERSION=4.2.1 scripts/kafka.sh start 19592
  cd tests/e2e && KELP_BOOTSTRAP=127.0.0.1:19592 python3 -m pytest -q -p no:cacheprovider \
      test_share_groups.py
  scripts/kafka.sh stop 19592

Against an external broker the restart test (d) skips, unless KELP_SHARE_RESTART_CMD is a shell
command (run from the repository root) that restarts it on its data, e.g.
KELP_SHARE_RESTART_CMD="scripts/kafka.sh restart 19592". On Kelp, (d) starts
a Kelp of its own on local storage."""

import collections
import glob
import os
import re
import shutil
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
import kwire
from conftest import require

SHARE_JARS = conftest.CACHE / "jars/clients-share"
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, DESCRIBE_SHARE_GROUP_OFFSETS = 76, 78, 90
TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
# Kafka's group configs: records produced before the group's first fetch are for it
# (share.auto.offset.reset's default, latest, would skip them).
EARLIEST = "share.auto.offset.reset=earliest"

_advertised = {}


def finalized_features(api_versions):
    """{name: max version level} of an ApiVersions v3+ response's FinalizedFeatures (tag 2)."""
    raw = api_versions["tags"].get(2)
    out = {}
    if raw is not None:
        r = kwire.Reader(raw)
        for _ in range(r.compact_array_len()):
            name, max_level, _min_level = r.compact_string(), r.i16(), r.i16()
            r.tagged_fields()
            out[name] = max_level
    return out


def serves_share_groups(bootstrap):
    """Whether the broker serves share groups: it advertises ShareGroupHeartbeat (76) and
    ShareFetch (78) v1 and DescribeShareGroupOffsets (90), and, if it is a KRaft Apache Kafka (metadata.version finalized), has
    share.version >= 1 finalized: Kafka 4.1 advertises the APIs with share groups off (no
    share.version), answering them UNSUPPORTED_VERSION; 4.2 finalizes share.version 1."""
    if bootstrap not in _advertised:
        r = kwire.api_versions(bootstrap, 3)
        apis, features = r["apis"], finalized_features(r)
        # kafka-share-groups --describe needs DescribeShareGroupOffsets (90) too.
        wanted = ((SHARE_GROUP_HEARTBEAT, 1), (SHARE_FETCH, 1), (DESCRIBE_SHARE_GROUP_OFFSETS, 0))
        _advertised[bootstrap] = all(k in apis and apis[k][0] <= v <= apis[k][1]
                                     for k, v in wanted) \
            and (features.get("share.version", 0) >= 1 or "metadata.version" not in features)
    return _advertised[bootstrap]


def require_share_groups(bootstrap):
    """Skips the test unless the broker serves share groups (serves_share_groups)."""
    if not serves_share_groups(bootstrap):
        pytest.skip("the broker does not serve share groups (KIP-932): no ShareGroupHeartbeat (76) "
                    "/ ShareFetch (78) v1 in ApiVersions, or share.version not finalized")


@pytest.fixture
def share_broker(broker):
    require_share_groups(broker.bootstrap)
    return broker


@pytest.fixture(scope="module")
def share_cp(tmp_path_factory):
    """The class path of ShareConsume (compiled once) and the 4.2 client and tool jars."""
    require(shutil.which("java") is not None and shutil.which("javac") is not None, "java, javac")
    jars = sorted(glob.glob(str(SHARE_JARS / "*.jar")))
    for name in ("kafka-clients", "kafka-tools"):  # 4.2 or later
        require(any(re.search(rf"/{name}-4\.([2-9]|\d\d)\.", j) for j in jars),
                f"{name} 4.2+ jars in {SHARE_JARS}")
    classes = tmp_path_factory.mktemp("share-classes")
    comp = subprocess.run(["javac", "-d", str(classes), "-cp", os.pathsep.join(jars),
                           str(conftest.ROOT / "tests/java/ShareConsume.java")],
                          capture_output=True, text=True, timeout=180)
    assert comp.returncode == 0, f"javac failed:\n{comp.stdout}\n{comp.stderr}"
    return os.pathsep.join([str(classes), *jars])


def java(cp, main, *args):
    return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, main, *map(str, args)]


def set_group_configs(cp, bootstrap, group, *kvs):
    """Sets group configs with Admin (IncrementalAlterConfigs on GROUP) and waits until
    DescribeConfigs shows them."""
    r = subprocess.run(java(cp, "ShareConsume", "config", bootstrap, group, *kvs),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-3000:]}"
    assert len([x for x in r.stdout.splitlines() if x.startswith("CONFIG ")]) == len(kvs), r.stdout


def share_groups(cp, bootstrap, *args, check=True):
    """kafka-share-groups (ShareGroupCommand 4.2) with these arguments: its stdout, checked
    (the tool exits 0 even when it failed, printing "Error: ..." on stdout, e.g. "Error:
    Executing share group command failed due to ...GroupIdNotFoundException: Group G not
    found."), or with check=False the finished process."""
    r = subprocess.run(java(cp, TOOL, "--bootstrap-server", bootstrap, *args),
                       capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0 and "Error:" not in r.stdout, \
            f"kafka-share-groups {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
        return r.stdout
    return r


def table(out, first):
    """The rows (lists of fields) of the table in `out` whose header starts with `first`."""
    rows, on = [], False
    for line in out.splitlines():
        if line.startswith(first):
            on = True
        elif on and line.strip():
            rows.append(line.split())
        elif on:
            on = False
    return rows


def describe_members(cp, bootstrap, group):
    """{client id: (member id, [partitions])} from kafka-share-groups --describe --members."""
    out = share_groups(cp, bootstrap, "--describe", "--group", group, "--members")
    members = {}
    for row in table(out, "GROUP "):
        assert row[0] == group and len(row) in (5, 6), out
        parts = row[5].split(":")[1].split(",") if len(row) > 5 else []
        assert int(row[4]) == len(parts), out
        members[row[3]] = (row[1], sorted(int(p) for p in parts))
    return members, out


def describe_state(cp, bootstrap, group):
    """(state, member count) from kafka-share-groups --describe --state."""
    out = share_groups(cp, bootstrap, "--describe", "--group", group, "--state")
    rows = table(out, "GROUP ")
    assert len(rows) == 1 and rows[0][0] == group and len(rows[0]) == 5, out
    # GROUP  COORDINATOR (ID)  STATE  #MEMBERS: "127.0.0.1:9092  (1)" is two fields.
    return rows[0][-2], int(rows[0][-1]), out


def describe_offsets(cp, bootstrap, group):
    """{(topic, partition): (start offset, lag)} from kafka-share-groups --describe (offsets,
    the default); "-" for one not known (None here)."""
    out = share_groups(cp, bootstrap, "--describe", "--group", group)
    offsets = {}
    for row in table(out, "GROUP "):
        assert row[0] == group and len(row) == 5, out
        num = (lambda v: None if v == "-" else int(v))
        offsets[(row[1], int(row[2]))] = (num(row[3]), num(row[4]))
    return offsets, out


class Member:
    """ShareConsume consume ... as a child process; its stdout lines are collected as it runs,
    with the time each arrived."""

    def __init__(self, cp, bootstrap, group, topic, log, *opts):
        self.cmd = java(cp, "ShareConsume", "consume", bootstrap, group, topic, *opts)
        self.log = log
        self.lines = []  # (monotonic time, line)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"share consumer still running after {timeout} s:\n{self.tail()}")
        self.reader.join(10)
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def out(self, kind):
        return [line.split()[1:] for _, line in list(self.lines) if line.startswith(kind + " ")]

    def records(self):
        """[(partition, offset, key, value, delivery count)] in the order polled."""
        return [(int(p), int(o), k, v, int(dc)) for p, o, k, v, dc in self.out("REC")]

    def tail(self, n=40):
        return "\n".join(line for _, line in self.lines[-n:])

    def check_clean_exit(self, timeout=60):
        rc = self.wait(timeout)
        text = self.tail()
        assert rc == 0 and self.out("DONE"), f"exit {rc}:\n{text}"
        assert not self.out("ERROR") and not self.out("COMMITERR"), text
        failed = [a for a in self.out("ACKED") if a[2] != "OK"]
        assert not failed, f"acknowledgements failed: {failed}\n{text}"


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap, topic, partitions, values, start=0):
    """values[i] keyed str(start + i) to partition (start + i) % partitions; returns
    {(partition, offset): value} (offsets from the delivery reports)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    where = {}

    def report(err, msg):
        assert err is None, err
        where[(msg.partition(), msg.offset())] = msg.value().decode()

    for i, v in enumerate(values, start):
        p.produce(topic, key=str(i).encode(), value=v.encode(), partition=i % partitions,
                  on_delivery=report)
        if i % 500 == 499:
            p.poll(0)
    assert p.flush(30) == 0
    assert len(where) == len(values)
    return where


def wait_until(cond, timeout, what, members=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        for m in members:
            assert m.proc.poll() is None or m.out("DONE"), \
                f"a share consumer exited early ({m.proc.returncode}):\n{m.tail()}"
        time.sleep(0.1)
    pytest.fail(f"{what} not within {timeout} s\n" + "\n---\n".join(m.tail() for m in members))


def names():
    run = uuid.uuid4().hex[:8]
    return f"share-{run}", f"sg-{run}"


def test_two_members_share_a_topic_and_kafka_share_groups_shows_them(share_broker, share_cp,
                                                                     tmp_path):
    """Two members, implicit acknowledgement, 2000 records over 4 partitions: each partition
    goes to one member, every record is delivered exactly once with delivery count 1, and
    kafka-share-groups lists the group and describes its members, state and offsets."""
    bs, cp = share_broker.bootstrap, share_cp
    topic, group = names()
    create_topic(bs, topic, 4)
    set_group_configs(cp, bs, group, EARLIEST)
    stop = tmp_path / "stop"
    log = open(tmp_path / "members.log", "w")
    members = [Member(cp, bs, group, topic, log, "--client-id", f"{group}-{i}", "--stop-file", stop,
                      "--timeout-ms", 90000) for i in (1, 2)]
    try:
        started = time.monotonic()
        for m in members:
            m.start()
        # Both members are assigned (the 4 partitions split 2 / 2) before anything is produced,
        # so both consume.
        seen = {}

        def assigned():
            r = share_groups(cp, bs, "--describe", "--group", group, "--members", check=False)
            if "GroupIdNotFoundException" in r.stdout:  # before the first heartbeat
                return False
            seen["members"], seen["out"] = describe_members(cp, bs, group)
            parts = [p for _, ps in seen["members"].values() for p in ps]
            return len(seen["members"]) == 2 and sorted(parts) == [0, 1, 2, 3] \
                and all(ps for _, ps in seen["members"].values())
        wait_until(assigned, 60, "both members assigned", members)
        print(f"both members assigned {time.monotonic() - started:.1f} s after they started")
        assert set(seen["members"]) == {f"{group}-1", f"{group}-2"}, seen["out"]
        by_client = {c: set(ps) for c, (_, ps) in seen["members"].items()}

        produced = produce(bs, topic, 4, [f"v{i}" for i in range(2000)])
        t0 = time.monotonic()
        wait_until(lambda: sum(len(m.out("REC")) for m in members) >= 2000, 60,
                   "2000 records consumed", members)
        consumed_s = time.monotonic() - t0

        print(seen["out"])
        state, count, out = describe_state(cp, bs, group)
        print(out)
        assert (state, count) == ("Stable", 2), out
        listed = share_groups(cp, bs, "--list").split()
        assert group in listed, listed
        listed = table(share_groups(cp, bs, "--list", "--state"), "GROUP ")
        assert [group, "Stable"] in listed, listed
    finally:
        stop.touch()
        for m in members:
            m.wait(60) if m.proc else None
        log.close()
    for m in members:
        m.check_clean_exit()

    recs = {m: m.records() for m in members}
    every = [(p, o) for m in members for p, o, _, _, _ in recs[m]]
    dupes = [po for po, n in collections.Counter(every).items() if n > 1]
    assert not dupes, f"delivered more than once: {dupes[:20]}"
    assert set(every) == set(produced), "not every record delivered"
    for m in members:
        assert all(dc == 1 for _, _, _, _, dc in recs[m]), [r for r in recs[m] if r[4] != 1][:20]
        assert all(produced[(p, o)] == v for p, o, _, v, _ in recs[m])
        # Each member got records, from its own partitions only.
        client = m.cmd[m.cmd.index("--client-id") + 1]
        assert recs[m] and {p for p, *_ in recs[m]} <= by_client[client], (client, by_client)
    print(f"2000 records consumed by 2 members in {consumed_s:.1f} s "
          f"({', '.join(str(len(recs[m])) for m in members)})")

    # Closed members leave: the group is Empty; every record was acknowledged (lag 0).
    def empty():
        return describe_state(cp, bs, group)[:2] == ("Empty", 0)
    wait_until(empty, 30, "the group Empty after its members closed")
    offsets, out = describe_offsets(cp, bs, group)
    print(out)
    assert sorted(offsets) == [(topic, p) for p in range(4)], out
    for (_, p), (start, lag) in offsets.items():
        assert lag == 0 and start is not None and 0 <= start <= 500, out
    r = share_groups(cp, bs, "--describe", "--group", group, "--members", check=False)
    # (on stderr, and exit 0)
    assert r.returncode == 0 and "Error:" not in r.stdout and not table(r.stdout, "GROUP "), r.stdout
    assert f"Share group '{group}' has no active members." in r.stderr, r.stderr


RELEASE, REJECT = "-release-once", "-reject"


def test_explicit_release_redelivers_reject_does_not_and_acks_stick(share_broker, share_cp,
                                                                    tmp_path):
    """Explicit acknowledgement with two members over 2 partitions: records marked for release
    are redelivered once (delivery count 2) and then accepted; rejected ones are not
    redelivered; once the members closed, a new member of the group gets none of the old
    records, and the new records produced meanwhile, each once (delivery count 1)."""
    bs, cp = share_broker.bootstrap, share_cp
    topic, group = names()
    create_topic(bs, topic, 2)
    set_group_configs(cp, bs, group, EARLIEST)
    values = [f"v{i}" + (RELEASE if i % 10 == 0 else REJECT if i % 15 == 0 else "")
              for i in range(300)]
    produced = produce(bs, topic, 2, values)
    n_release = sum(v.endswith(RELEASE) for v in values)
    stop = tmp_path / "stop"
    log = open(tmp_path / "members.log", "w")
    members = [Member(cp, bs, group, topic, log, "--ack", "explicit", "--release", RELEASE,
                      "--reject", REJECT, "--commit-each-poll", "--stop-file", stop,
                      "--timeout-ms", 90000) for _ in range(2)]
    try:
        t0 = time.monotonic()
        for m in members:
            m.start()
        wait_until(lambda: sum(len(m.out("REC")) for m in members) >= 300 + n_release, 60,
                   f"{300 + n_release} deliveries", members)
        print(f"300 records and {n_release} redeliveries in {time.monotonic() - t0:.1f} s")
        time.sleep(1)  # nothing more may come
    finally:
        stop.touch()
        for m in members:
            m.wait(60) if m.proc else None
    for m in members:
        m.check_clean_exit()

    deliveries = collections.defaultdict(list)  # (partition, offset) -> [(dc, ack)]
    for m in members:
        for (p, o, _, v, dc), ack in zip(m.records(), m.out("ACK"), strict=True):
            assert produced[(p, o)] == v and ack[:2] == [str(p), str(o)], (p, o, v, ack)
            deliveries[(p, o)].append((dc, ack[2]))
    assert set(deliveries) == set(produced), "not every record delivered"
    for po, v in produced.items():
        got = sorted(deliveries[po])
        if v.endswith(RELEASE):
            assert got == [(1, "RELEASE"), (2, "ACCEPT")], (po, v, got)
        elif v.endswith(REJECT):
            assert got == [(1, "REJECT")], (po, v, got)
        else:
            assert got == [(1, "ACCEPT")], (po, v, got)

    # A new member: nothing old (all acknowledged), the 40 records produced now, once each.
    late = Member(cp, bs, group, topic, log, "--ack", "explicit", "--max", 40,
                  "--timeout-ms", 60000).start()
    try:
        fresh = produce(bs, topic, 2, [f"new{i}" for i in range(40)], start=300)
        rc = late.wait(70)
    finally:
        late.kill()
        log.close()
    late.check_clean_exit()
    got = late.records()
    old = [r for r in got if (r[0], r[1]) in produced]
    assert not old, f"records acknowledged before were delivered again: {old[:20]}"
    assert sorted((p, o) for p, o, *_ in got) == sorted(fresh), got
    assert all(dc == 1 for *_, dc in got), got
    assert rc == 0

    offsets, out = describe_offsets(cp, bs, group)
    assert all(lag == 0 for _, lag in offsets.values()), out


def test_dead_member_records_are_redelivered_to_another(share_broker, share_cp, tmp_path):
    """A member halts (Runtime.halt: no acknowledgement, no close) right after its first poll
    returned records. The broker sees its connections drop and releases what it had acquired
    (or, at worst, the group's 15 s record lock runs out): a second member gets those records
    again with delivery count 2, and all the others with count 1."""
    bs, cp = share_broker.bootstrap, share_cp
    topic, group = names()
    create_topic(bs, topic, 1)  # one partition: the second member shares it with the dead one
    set_group_configs(cp, bs, group, EARLIEST, "share.record.lock.duration.ms=15000")
    # Two rounds, so that the log has a batch boundary at 200: the dead member asks for 100
    # records (max.poll.records) and the broker hands out whole batches, so the records after
    # the first batch are not all taken by it.
    produced = produce(bs, topic, 1, [f"v{i}" for i in range(200)])
    produced.update(produce(bs, topic, 1, [f"v{i}" for i in range(200, 1000)], start=200))
    log = open(tmp_path / "members.log", "w")
    dead = Member(cp, bs, group, topic, log, "--halt", "--prop", "max.poll.records=100",
                  "--timeout-ms", 60000).start()
    try:
        assert dead.wait(70) == 3, dead.tail()
    finally:
        dead.kill()
    halted = time.monotonic()
    held = {(p, o) for p, o, *_ in dead.records()}
    assert held and dead.out("HALT") and all(dc == 1 for *_, dc in dead.records()), dead.tail()

    stop = tmp_path / "stop"
    second = Member(cp, bs, group, topic, log, "--stop-file", stop, "--timeout-ms", 90000).start()
    try:
        wait_until(lambda: len({(p, o) for p, o, *_ in second.records()}) >= 1000, 60,
                   "every record delivered to the second member", [second])
    finally:
        stop.touch()
        second.wait(60)
        log.close()
    second.check_clean_exit()
    recs = second.records()
    assert sorted((p, o) for p, o, *_ in recs) == sorted(produced), "each record exactly once"
    again = {(p, o) for p, o, _, _, dc in recs if dc == 2}
    assert held <= again, f"held by the dead member, not redelivered: {sorted(held - again)[:20]}"
    assert all(dc in (1, 2) for *_, dc in recs)
    assert len(again) < 1000, "the dead member cannot have acquired everything"
    first_again = min(t for t, line in second.lines
                      if line.startswith("REC ") and line.endswith(" 2"))
    print(f"the dead member held {len(held)} records (polled), {len(again)} came back with "
          f"delivery count 2, the first {first_again - halted:.1f} s after it halted")


def durable_state_across_restart(cp, bootstrap, restart, tmp_path):
    """Acknowledges the first 60 of 100 records, closes (the other 40 released), restarts the
    broker, produces 20 more: a new member gets the 40 released ones (delivery count 2) and the
    20 new ones (count 1), none of the 60 acknowledged."""
    topic, group = names()
    create_topic(bootstrap, topic, 1)
    set_group_configs(cp, bootstrap, group, EARLIEST)
    before = produce(bootstrap, topic, 1, [f"v{i}" for i in range(100)])
    log = open(tmp_path / "members.log", "w")
    try:
        first = Member(cp, bootstrap, group, topic, log, "--ack", "explicit", "--accept-first", 60,
                       "--timeout-ms", 60000).start()
        first.check_clean_exit(70)
        accepted = {(int(p), int(o)) for p, o, t in first.out("ACK") if t == "ACCEPT"}
        assert accepted == {(0, o) for o in range(60)}, first.tail()

        restart()

        after = produce(bootstrap, topic, 1, [f"new{i}" for i in range(20)], start=100)
        second = Member(cp, bootstrap, group, topic, log, "--ack", "explicit", "--max", 60,
                        "--timeout-ms", 60000).start()
        second.check_clean_exit(70)
    finally:
        log.close()
    got = {(p, o): dc for p, o, _, _, dc in second.records()}
    old = sorted(po for po in got if po in accepted)
    assert not old, f"acknowledged before the restart, delivered again after it: {old[:20]}"
    assert sorted(got) == sorted(set(before) - accepted | set(after)), sorted(got)
    assert all(dc == 2 for po, dc in got.items() if po in before), got
    assert all(dc == 1 for po, dc in got.items() if po in after), got


@pytest.mark.skipif(conftest.ADVERTISE_SHARDS and not conftest.EXTERNAL,
                    reason="starts a Kelp of its own: runs on the local pass")
def test_share_state_survives_broker_restart(share_cp, tmp_path):
    """The group's share state (acknowledged and released records) is durable across a broker
    restart: on a Kelp of its own on local storage, or on the external broker when
    KELP_SHARE_RESTART_CMD can restart it."""
    if conftest.EXTERNAL:
        cmd = os.environ.get("KELP_SHARE_RESTART_CMD")
        if not cmd:
            pytest.skip("KELP_BOOTSTRAP: set KELP_SHARE_RESTART_CMD to restart the external broker")
        require_share_groups(conftest.EXTERNAL)

        def restart():
            r = subprocess.run(cmd, shell=True, cwd=conftest.ROOT, capture_output=True, text=True,
                               timeout=180)
            assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
        t0 = time.monotonic()
        durable_state_across_restart(share_cp, conftest.EXTERNAL, restart, tmp_path)
        print(f"with the restart: {time.monotonic() - t0:.1f} s")
        return
    if conftest.STORAGE != "local":
        pytest.skip("durable share state: a Kelp of its own on local storage")
    with conftest.running_broker(conftest.Broker, "kelp-share-restart-") as b:
        require_share_groups(b.bootstrap)
        try:
            durable_state_across_restart(share_cp, b.bootstrap, b.restart, tmp_path)
        except BaseException:
            print(f"--- kelp log ({b.log_path}) ---\n{b.log_tail()}")
            raise
