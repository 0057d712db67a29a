"""Kafka Connect (Apache Kafka 4.1's distributed worker, connect-runtime and connect-file from
Maven Central) runs through Kelp: a FileStreamSource connector copies a file's lines into a
topic and a FileStreamSink connector copies the topic into another file. The worker keeps its
connector configs, source offsets and statuses in three topics it creates compacted (and
checks that they are, with DescribeConfigs); it is killed with SIGKILL while lines are being
appended and started again, reads its connectors back from those topics, and every line
reaches the output file (at least once: Connect's file connectors are at-least-once). Kelp
too is killed with SIGKILL under the running worker and restarted on its data: the worker's
clients reconnect and nothing is lost.

Runs on the local pass (the worker takes ~15 s to start, each run ~50 s); the worker-kill
case passed on SeaweedMQ as well when run by hand (KELP_STORAGE=seaweedmq)."""

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

import conftest
from conftest import require

pytestmark = pytest.mark.skipif(
    bool(conftest.EXTERNAL) or conftest.STORAGE != "local" or conftest.ADVERTISE_SHARDS,
    reason="runs on the local pass (checked by hand on SeaweedMQ too: the topics Connect "
           "keeps are plain compacted topics to the storage engine)")


class Worker:
    """One Connect distributed worker, started and stopped by PID."""

    def __init__(self, tmp_path, bootstrap, tag):
        self.rest = conftest.free_port()
        self.props = tmp_path / "worker.properties"
        self.topics = {k: f"connect-{k}-{tag}" for k in ("configs", "offsets", "status")}
        self.props.write_text("\n".join([
            f"bootstrap.servers={bootstrap}",
            f"group.id=connect-{tag}",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            f"config.storage.topic={self.topics['configs']}",
            f"offset.storage.topic={self.topics['offsets']}",
            f"status.storage.topic={self.topics['status']}",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "offset.flush.interval.ms=500",
            # A restarted worker gets the lost connectors back at once, not after 5 minutes.
            "scheduled.rebalance.max.delay.ms=2000",
            f"listeners=http://127.0.0.1:{self.rest}",
            "plugin.discovery=only_scan",
        ]) + "\n")
        self.log = open(tmp_path / "worker.log", "ab")
        self.proc = None

    def start(self):
        log4j = conftest.CACHE / "jars/kafka-log4j2-tools.xml"
        opts = [f"-Dlog4j2.configurationFile={log4j}"] if log4j.exists() else []
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", *opts, "-cp", str(conftest.KAFKA_JARS / "*"),
             "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props)],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            assert self.proc.poll() is None, f"worker exited {self.proc.returncode}"
            try:
                self.call("GET", "/connectors")
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        raise AssertionError("the Connect worker's REST API did not come up")

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.rest}{path}", data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return json.loads(text) if text else None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def lines_of(path):
    try:
        with open(path) as f:
            return [line.rstrip("\n") for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def wait_until(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out: {what}")


@pytest.mark.parametrize("victim", ["worker", "kelp"])
def test_connect_distributed_file_pipeline_survives_kill_9(broker, tmp_path, victim):
    """SIGKILL to the Connect worker (started again), or to Kelp under it (started again on
    its data), while lines are appended."""
    require(conftest.KAFKA_JARS.is_dir()
            and any(conftest.KAFKA_JARS.glob("connect-file-*.jar")),
            f"connect-runtime and connect-file jars in {conftest.KAFKA_JARS}")
    tag = uuid.uuid4().hex[:8]
    topic = f"connect-lines-{tag}"
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"line-{i:05d}" for i in range(500)]
    src.write_text("\n".join(first) + "\n")
    worker = Worker(tmp_path, broker.bootstrap, tag)
    try:
        worker.start()
        worker.call("POST", "/connectors", {"name": f"src-{tag}", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": str(src), "topic": topic}})
        worker.call("POST", "/connectors", {"name": f"sink-{tag}", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1", "file": str(dst), "topics": topic}})
        wait_until(lambda: set(first) <= set(lines_of(dst)), 120, "the first 500 lines copied")

        # Lines keep coming while the worker is killed and started again.
        more = [f"line-{i:05d}" for i in range(500, 1500)]
        done = threading.Event()

        def append():
            with open(src, "a") as f:
                for i in range(0, len(more), 20):
                    f.write("\n".join(more[i:i + 20]) + "\n")
                    f.flush()
                    time.sleep(0.05)
            done.set()

        t = threading.Thread(target=append, daemon=True)
        t.start()
        time.sleep(1)
        if victim == "worker":
            worker.kill()
            worker.start()
        else:
            broker.proc.send_signal(signal.SIGKILL)
            broker.proc.wait(10)
            broker.start()
        t.join(60)
        assert done.is_set()
        want = set(first) | set(more)
        wait_until(lambda: want <= set(lines_of(dst)), 180,
                   "every line copied after the restart")
        status = worker.call("GET", f"/connectors/sink-{tag}/status")
        assert status["connector"]["state"] == "RUNNING", status
        assert all(tk["state"] == "RUNNING" for tk in status["tasks"]), status

        # Connect made its topics compacted, as it requires of them.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        res = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in worker.topics.values()]
        for r, f in admin.describe_configs(res).items():
            cfg = f.result(timeout=15)
            assert cfg["cleanup.policy"].value == "compact", (r, cfg["cleanup.policy"].value)
    finally:
        worker.stop()
        worker.log.close()
    assert broker.alive()
