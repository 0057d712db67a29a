"""Durable local storage end to end: restart keeps data and offsets, kill -9 during acks=all
produce loses nothing acknowledged, a damaged segment tail is repaired at start, and an
unwritable data directory fails start-up clearly."""

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import conftest
from conftest import KELP, Broker, running_broker

# These start their own Kelp on local storage, whatever the pass: the local pass runs them
# (the memory and --advertise-shards passes would repeat them as they are).
pytestmark = pytest.mark.skipif(conftest.STORAGE != "local" or conftest.ADVERTISE_SHARDS,
                                reason="local storage: covered by the local pass")


class LocalBroker(Broker):
    """The shared Broker, always with --storage local (whatever KELP_STORAGE says)."""

    def start(self):
        saved, conftest.STORAGE = conftest.STORAGE, "local"
        try:
            # Restarts reuse the same port: Kelp must rebind it at once after a crash.
            super().start()
        finally:
            conftest.STORAGE = saved

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def local_broker():
    with running_broker(LocalBroker, "kelp-local-", ["--segment-bytes", "65536"]) as b:
        try:
            yield b
        finally:
            # Shown by pytest when the test fails.
            print(open(os.path.join(b.data_dir, "kelp.log"), errors="replace").read()[-3000:])


def produce(bootstrap, topic, n, prefix="m"):
    # Small batches, so segments (64 KiB in these tests) roll.
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                  "batch.size": 4096})
    for i in range(n):
        p.produce(topic, key=f"{prefix}{i}".encode(), value=f"{prefix}-value-{i}".encode() * 5)
    assert p.flush(30) == 0


def consume_all(bootstrap, topic, n, group=None, timeout=30):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group or f"g-{time.time_ns()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append((m.partition(), m.offset(), m.key(), m.value()))
    return c, out


def watermarks(bootstrap, topic, partitions=1):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
    finally:
        c.close()


def test_restart_keeps_data_and_offsets(local_broker):
    b = local_broker
    produce(b.bootstrap, "keep", 3000)
    c, before = consume_all(b.bootstrap, "keep", 3000, group="keeper")
    assert len(before) == 3000
    c.commit(asynchronous=False)
    c.close()
    wm = watermarks(b.bootstrap, "keep")
    assert wm == [(0, 3000)]
    # More than one segment was written (64 KiB segments).
    assert len(glob.glob(os.path.join(b.data_dir, "topics", "keep-0", "*.log"))) > 1

    b.restart()
    assert watermarks(b.bootstrap, "keep") == wm
    c, after = consume_all(b.bootstrap, "keep", 3000)
    c.close()
    assert after == before
    # The committed group offset survived too.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "keeper"})
    committed = c.committed([TopicPartition("keep", 0)], timeout=10)
    c.close()
    assert committed[0].offset == 3000
    topics = json.load(open(os.path.join(b.data_dir, "meta", "topics.json")))
    assert [t["name"] for t in topics["topics"]] == ["keep"]


PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, topic, out = sys.argv[1:4]
    f = open(out, "a", buffering=1)
    def cb(err, msg):
        if err is None:
            f.write(f"{msg.key().decode()} {msg.partition()} {msg.offset()}\\n")
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "message.timeout.ms": 5000, "enable.idempotence": True})
    i = 0
    while True:
        try:
            p.produce(topic, key=f"{sys.argv[4]}-{i}".encode(), value=b"x" * 100, on_delivery=cb)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
""")


def test_kill9_loses_no_acknowledged_message(local_broker):
    b = local_broker
    acked_file = os.path.join(b.data_dir, "acked.txt")
    script = os.path.join(b.data_dir, "producer.py")
    open(script, "w").write(PRODUCER)
    for rnd in range(5):
        prod = subprocess.Popen([sys.executable, script, b.bootstrap, "crash", acked_file, str(rnd)])
        time.sleep(1.5)
        b.kill9()
        time.sleep(0.3)
        prod.kill()
        prod.wait()
        b.start()
    acked = [l.split() for l in open(acked_file).read().splitlines() if l.strip()]
    assert len(acked) > 100
    hw = watermarks(b.bootstrap, "crash")[0][1]
    c, got = consume_all(b.bootstrap, "crash", hw, timeout=60)
    c.close()
    assert len(got) == hw
    by_offset = {off: key.decode() for _, off, key, _ in got}
    keys = [key.decode() for _, _, key, _ in got]
    for key, _, off in acked:
        assert by_offset.get(int(off)) == key, f"acknowledged {key}@{off} missing"
    # Exactly once, and in produce order within each producer run.
    acked_keys = {k for k, _, _ in acked}
    assert len([k for k in keys if k in acked_keys]) == len(acked_keys)
    for rnd in range(5):
        seq = [int(k.split("-")[1]) for k in keys if k.startswith(f"{rnd}-")]
        assert seq == sorted(seq)


@pytest.mark.parametrize("damage", ["garbage", "cut"])
def test_damaged_tail_is_repaired(local_broker, damage):
    b = local_broker
    produce(b.bootstrap, "torn", 200)
    b.stop()
    segs = sorted(glob.glob(os.path.join(b.data_dir, "topics", "torn-0", "*.log")))
    last = segs[-1]
    size = os.path.getsize(last)
    if damage == "garbage":
        with open(last, "ab") as f:
            f.write(os.urandom(777))
    else:
        with open(last, "r+b") as f:
            f.truncate(size - 10)
    b.start()
    hw = watermarks(b.bootstrap, "torn")[0][1]
    assert 0 < hw <= 200
    if damage == "garbage":
        assert hw == 200
    c, got = consume_all(b.bootstrap, "torn", hw)
    c.close()
    assert [o for _, o, _, _ in got] == list(range(hw))
    assert all(v == f"m-value-{o}".encode() * 5 for _, o, _, v in got)
    # The broker keeps working after the repair.
    produce(b.bootstrap, "torn", 10, prefix="n")
    assert watermarks(b.bootstrap, "torn")[0][1] == hw + 10


def test_unwritable_data_dir_fails_start():
    if not KELP.exists():
        pytest.skip("kelp not built")
    with tempfile.NamedTemporaryFile() as f:
        bad = os.path.join(f.name, "data")
        r = subprocess.run(
            [str(KELP), "--listen", "127.0.0.1:0", "--storage", "local", "--data-dir", bad],
            capture_output=True, timeout=20,
        )
        assert r.returncode != 0
        err = r.stderr.decode()
        assert "data directory" in err and bad in err, err


def test_sigterm_stops_cleanly_every_time():
    """SIGTERM is a clean stop (the shards close their sockets and rings, engines drain):
    exit status 0 and the log says so, every time. (A thread started before the signal
    mask was set once let the kernel hand it SIGTERM, which killed the process outright.)"""
    for i in range(5):
        with tempfile.TemporaryDirectory(prefix="kelp-sigterm-") as d:
            b = LocalBroker(d)
            b.start()
            os.kill(b.proc.pid, signal.SIGTERM)
            code = b.proc.wait(20)
            b.proc = None
            b.log.close()
            with open(b.log_path, "rb") as f:
                log = f.read()
            assert code == 0, f"run {i}: exit {code}\n{log[-2000:].decode(errors='replace')}"
            assert b"shutting down" in log, f"run {i}"
