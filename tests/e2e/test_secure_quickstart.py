"""The README's secure quick start (scripts/secure-quickstart.sh): one command makes a CA, a
server certificate and an admin, and starts Kelp on SASL_SSL with ACLs; the admin's generated
client settings produce and consume, a wrong password is refused, and a second start reuses
the same files (same admin password, same data)."""

import os
import signal
import subprocess

import pytest
from confluent_kafka.admin import AdminClient

import conftest
from conftest import require
from test_tls import cannot_connect, round_trip

pytestmark = pytest.mark.skipif(bool(conftest.EXTERNAL) or conftest.STORAGE != "local",
                                reason="runs its own Kelp on the default (local) storage")


def read_conf(path):
    conf = {}
    for line in open(path):
        k, _, v = line.strip().partition("=")
        if k:
            conf[k] = v
    return conf


def start(d, port):
    env = {**os.environ, "KELP_BIN": str(conftest.KELP), "KELP_PORT": str(port),
           "KELP_HOST": "127.0.0.1"}
    log = open(str(d) + ".log", "ab")
    args = ["--cores", conftest.default_cores()] if conftest.default_cores() else []
    p = subprocess.Popen([str(conftest.ROOT / "scripts/secure-quickstart.sh"), d, "--", *args],
                         env=env, stdout=log, stderr=log)
    try:
        conftest.wait_port(port, p, tls=True)
    except RuntimeError:
        p.kill()
        raise
    return p


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=15)


def test_secure_quickstart(tmp_path):
    require(__import__("shutil").which("openssl") is not None, "openssl")
    d = str(tmp_path / "secure")
    port = conftest.free_port()
    p = start(d, port)
    try:
        conf = {**read_conf(os.path.join(d, "admin.librdkafka.conf")),
                "bootstrap.servers": f"127.0.0.1:{port}"}
        round_trip(conf, n=50)
        assert cannot_connect({**conf, "sasl.password": "wrong"})
        topics = set(AdminClient(conf).list_topics(timeout=10).topics)
    finally:
        stop(p)
    password = conf["sasl.password"]
    p = start(d, port)
    try:
        again = read_conf(os.path.join(d, "admin.librdkafka.conf"))
        assert again["sasl.password"] == password
        # Same data directory: the topics are still there.
        assert topics <= set(AdminClient(conf).list_topics(timeout=10).topics)
    finally:
        stop(p)


