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

    def __init__(self, jars, bootstrap, app_id, src, dst, state_dir, log):
        self.cmd = ["java", "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", os.pathsep.join(jars),
                    str(conftest.ROOT / "tests/java/StreamsWordCount.java"),
                    bootstrap, app_id, src, dst, state_dir]
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


def latest_counts(bootstrap, topic, timeout=8):
    """The last count per word in `topic`, read_committed from the start, until the end of
    every partition was reached."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe([topic])
    counts, ended, deadline = {}, set(), time.time() + timeout
    try:
        while time.time() < deadline:
            m = c.poll(0.3)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
                    if len(ended) == 3:
                        break
                    continue
                raise KafkaException(m.error())
            ended.discard(m.partition())
            counts[m.key().decode()] = struct.unpack(">q", m.value())[0]
    finally:
        c.close()
    return counts


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


def word_count_through_a_kill(broker, tmp_path, kill):
    """Runs the word count while its input flows, calls `kill(app)` once some counts are
    committed and the input still flows, then waits until the last count of every word is
    exact (failing at once on a count above the truth: a double count never goes away)."""
    require(shutil.which("java") is not None, "java")
    jars = glob.glob(str(conftest.CLIENT_JARS / "*.jar"))
    require(any("kafka-streams-4" in j for j in jars), "kafka-streams 4.x jars")
    bs = broker.bootstrap
    run = uuid.uuid4().hex[:8]
    src, dst, app_id = f"wc-in-{run}", f"wc-out-{run}", f"wc-{run}"
    admin = AdminClient({"bootstrap.servers": bs})
    for t in (src, dst):
        admin.create_topics([NewTopic(t, 3, 1)])[t].result(30)

    # 30000 lines of 1-5 words, written over ~15 s.
    lines = [" ".join(VOCABULARY[(i * 7 + k * 13) % len(VOCABULARY)] for k in range(1 + i % 5))
             for i in range(30000)]
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
        deadline, counts = time.time() + 240, {}
        while time.time() < deadline:
            assert app.proc.poll() is None, "\n".join(app.lines[-50:])
            counts = latest_counts(bs, dst)
            if counts == dict(expected):
                break
            over = {w: (c, expected[w]) for w, c in counts.items() if c > expected[w]}
            assert not over, f"counted twice: {over}"
            time.sleep(1)
        assert counts == dict(expected), (
            f"missing: { {w: (counts.get(w), n) for w, n in expected.items() if counts.get(w) != n} }"
            + "\n" + "\n".join(app.lines[-30:]))
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
