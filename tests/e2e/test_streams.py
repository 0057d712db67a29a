"""Kafka Streams (kafka-streams from Maven Central) with processing.guarantee=exactly_once_v2
over Kelp: a word count (tests/java/StreamsWordCount.java, two stream threads, a repartition
topic and a changelogged count store, both created by Streams) is killed with SIGKILL while
its input flows and started again; on durable storage Kelp itself is also killed with SIGKILL
under it and restarted. The last count per word in the output, read with read_committed, must
be exact: nothing counted in an unfinished transaction may be counted twice, nothing may be
lost. (The same test with at_least_once instead counts twice.)

Transactions run on every engine; Kelp is killed under the application on the durable ones
(local storage and SeaweedMQ)."""

import collections
import glob
import os
import shutil
import signal
import struct
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
from conftest import require

pytestmark = [
    pytest.mark.skipif(bool(conftest.EXTERNAL), reason="checks Kelp's own transactions"),
    pytest.mark.skipif(conftest.STORAGE not in ("memory", "local", "seaweedmq"),
                       reason="transactions"),
]

VOCABULARY = [f"w{i}" for i in range(40)]


class StreamsApp:
    """The word count as a child process; its output lines are collected as it runs."""

    def __init__(self, jars, bootstrap, app_id, src, dst, state_dir, log, configs=()):
        self.cmd = ["java", "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", os.pathsep.join(jars),
                    str(conftest.ROOT / "tests/java/StreamsWordCount.java"),
                    bootstrap, app_id, src, dst, state_dir, *configs]
        self.log = log
        self.lines = []
        self.proc = None

    def start(self):
        self.lines = []
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc):
        for line in proc.stdout:
            self.lines.append(line.rstrip())

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def to_end(c, partitions, timeout, ended):
    """The messages `c` (with enable.partition.eof) polls until each of `partitions`
    partitions is read to its end, or `timeout` s passed; `ended` gets those that were."""
    deadline = time.time() + timeout
    while len(ended) < partitions and time.time() < deadline:
        m = c.poll(0.3)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(m.error())
            ended.add(m.partition())
            continue
        ended.discard(m.partition())
        yield m


def latest_counts(bootstrap, topic, timeout=8):
    """The last count per word in `topic`, read_committed from the start, until the end of
    every partition was reached."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe([topic])
    try:
        return {m.key().decode(): struct.unpack(">q", m.value())[0]
                for m in to_end(c, 3, timeout, set())}
    finally:
        c.close()


def produce_lines(bootstrap, topic, lines, per_second=None):
    """Writes `lines` (keyed by their index), at about `per_second` lines a second if given."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i, line in enumerate(lines):
        p.produce(topic, key=str(i).encode(), value=line.encode())
        if i % 200 == 199:
            p.poll(0)
            if per_second:
                time.sleep(200 / per_second)
    assert p.flush(30) == 0


def streams_jars():
    require(shutil.which("java") is not None, "java")
    jars = glob.glob(str(conftest.CLIENT_JARS / "*.jar"))
    require(any("kafka-streams-4" in j for j in jars), "kafka-streams 4.x jars")
    return jars


def word_lines(n, start=0):
    """`n` lines of 1-5 words; any 200 in a row use every word."""
    return [" ".join(VOCABULARY[(i * 7 + k * 13) % len(VOCABULARY)] for k in range(1 + i % 5))
            for i in range(start, start + n)]


def wait_counts(app, bs, dst, expected, within):
    """Waits until the last count of every word in `dst` is `expected`, failing at once on a
    count above it (a double count never goes away)."""
    deadline, counts = time.time() + within, {}
    while time.time() < deadline:
        assert app.proc.poll() is None, "\n".join(app.lines[-50:])
        counts = latest_counts(bs, dst)
        if counts == dict(expected):
            return
        over = {w: (c, expected[w]) for w, c in counts.items() if c > expected[w]}
        assert not over, f"counted twice: {over}"
        time.sleep(1)
    pytest.fail(
        f"missing: { {w: (counts.get(w), n) for w, n in expected.items() if counts.get(w) != n} }"
        + "\n" + "\n".join(app.lines[-30:]))


def word_count_through_a_kill(broker, tmp_path, kill):
    """Runs the word count while its input flows, calls `kill(app)` once some counts are
    committed and the input still flows, then waits until the last count of every word is
    exact (failing at once on a count above the truth: a double count never goes away)."""
    jars = streams_jars()
    bs = broker.bootstrap
    run = uuid.uuid4().hex[:8]
    src, dst, app_id = f"wc-in-{run}", f"wc-out-{run}", f"wc-{run}"
    admin = AdminClient({"bootstrap.servers": bs})
    for t in (src, dst):
        admin.create_topics([NewTopic(t, 3, 1)])[t].result(30)

    # 30000 lines of 1-5 words, written over ~15 s.
    lines = word_lines(30000)
    expected = collections.Counter(w for line in lines for w in line.split())
    writer = threading.Thread(target=produce_lines, args=(bs, src, lines, 2000), daemon=True)

    log = open(tmp_path / "streams.log", "w")
    app = StreamsApp(jars, bs, app_id, src, dst, str(tmp_path / "state"), log)
    try:
        app.start()
        writer.start()
        deadline = time.time() + 180
        while time.time() < deadline:
            assert app.proc.poll() is None, "\n".join(app.lines[-50:])
            if latest_counts(bs, dst, timeout=3):
                break
            time.sleep(0.5)
        else:
            pytest.fail("no output within 180 s:\n" + "\n".join(app.lines[-50:]))
        assert writer.is_alive(), "the input was all in before the kill: nothing to prove"
        kill(app)
        writer.join(120)
        assert not writer.is_alive()
        wait_counts(app, bs, dst, expected, 240)
        assert not [line for line in app.lines if line.startswith("ERROR")], app.lines
    finally:
        app.stop()
        log.close()
    assert broker.alive()


def test_streams_exactly_once_word_count_survives_kill(broker, tmp_path):
    """The application is killed with SIGKILL and started again 2 s later."""
    def kill(app):
        app.kill()
        time.sleep(2)
        app.start()
    word_count_through_a_kill(broker, tmp_path, kill)


@pytest.mark.skipif(conftest.STORAGE not in ("local", "seaweedmq"), reason="durable transactions")
def test_streams_exactly_once_word_count_survives_broker_kill_9(broker, tmp_path):
    """Kelp is killed with SIGKILL under the running application (transactions open, markers
    being written) and started again on its data: the application's clients reconnect, its
    open transactions are aborted or completed, and the counts stay exact."""
    def kill(app):
        broker.proc.send_signal(signal.SIGKILL)
        broker.proc.wait(10)
        broker.start()
    word_count_through_a_kill(broker, tmp_path, kill)


def changelog_of(bs, app_id):
    """The name of the count store's changelog topic (Streams names it after the store)."""
    admin = AdminClient({"bootstrap.servers": bs})
    names = [t for t in admin.list_topics(timeout=10).topics
             if t.startswith(app_id) and t.endswith("-changelog")]
    assert len(names) == 1, names
    return names[0]


def records_and_end(bs, topic, partitions=3):
    """(records read from offset 0 of every partition, the sum of their end offsets)."""
    from confluent_kafka import TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        ends = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        ended = set()
        records = sum(1 for _ in to_end(c, partitions, 30, ended))
        assert len(ended) == partitions, "changelog not read to its end"
        return records, ends
    finally:
        c.close()


@conftest.OWN_KELPS
def test_streams_aggregation_restores_from_compacted_changelog(tmp_path, sw):
    """The word count's count store is a changelogged aggregation. After a first batch of
    input is counted (every count a changelog record: no record cache), the application
    stops; on local storage its changelog (compacted, as
    Streams creates it: segments rolled every 100 ms here, cleaned when 1 % is dirty) is
    cleaned by Kelp's log cleaner — transactional markers included — and Kelp restarts on the
    cleaned log. The application's state directory is wiped, so its store must be rebuilt from
    the changelog; counts of a second batch of input must then add up to both batches: a store
    restored wrong (offset gaps, markers, an aborted write) counts from the wrong base."""
    jars = streams_jars()
    with conftest.running_broker(conftest.Broker, "kelp-streams-restore-",
                                 ["--log-cleaner-backoff-ms", "200"], seaweed=sw) as b:
        bs = b.bootstrap
        run = uuid.uuid4().hex[:8]
        src, dst, app_id = f"agg-in-{run}", f"agg-out-{run}", f"agg-{run}"
        admin = AdminClient({"bootstrap.servers": bs})
        for t in (src, dst):
            admin.create_topics([NewTopic(t, 3, 1)])[t].result(30)
        first, second = word_lines(6000), word_lines(4000, start=6000)
        expected = collections.Counter(w for line in first for w in line.split())
        # No record cache: every count goes to the changelog (and the output), so the
        # changelog holds thousands of records for 40 keys.
        configs = ["statestore.cache.max.bytes=0", "topic.segment.ms=100",
                   "topic.min.cleanable.dirty.ratio=0.01"]
        state = tmp_path / "state"
        log = open(tmp_path / "streams.log", "w")
        app = StreamsApp(jars, bs, app_id, src, dst, str(state), log, configs)
        try:
            app.start()
            deadline = time.time() + 120
            while "STATE RUNNING" not in app.lines and time.time() < deadline:
                assert app.proc.poll() is None, "\n".join(app.lines[-50:])
                time.sleep(0.2)
            # Over ~6 s while the application runs: dozens of commits, so many segments.
            produce_lines(bs, src, first, per_second=1000)
            wait_counts(app, bs, dst, expected, 180)
            app.stop()
            assert not [line for line in app.lines if line.startswith("ERROR")], app.lines

            changelog = changelog_of(bs, app_id)
            records, ends = records_and_end(bs, changelog)
            print(f"changelog {changelog}: {records} records below end offsets {ends}")
            if conftest.STORAGE == "local":
                # The cleaner leaves about one record per word (plus the active segments).
                deadline = time.time() + 60
                while records > ends // 4 and time.time() < deadline:
                    time.sleep(1)
                    records, _ = records_and_end(bs, changelog)
                print(f"compacted to {records} records")
                assert records <= ends // 4, (records, ends)
            b.restart()

            shutil.rmtree(state)
            produce_lines(bs, src, second)
            expected.update(w for line in second for w in line.split())
            app.start()
            wait_counts(app, bs, dst, expected, 180)
            restored = [line.split() for line in app.lines if line.startswith("RESTORED ")]
            assert restored and all(r[1] == changelog for r in restored), app.lines
            total = sum(int(r[3]) for r in restored)
            # Every word's count was restored; on local from what the cleaner left.
            assert len(VOCABULARY) <= total <= records, (total, records, restored)
            assert not [line for line in app.lines if line.startswith("ERROR")], app.lines
        finally:
            app.stop()
            log.close()
