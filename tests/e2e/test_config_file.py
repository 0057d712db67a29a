"""The --config file, --print-config and systemd readiness (sd_notify), against the real binary.

A Kelp started with only `--config FILE` takes its port, data dir, metrics address and cores
from the file and serves a real client there; a command-line flag overrides the file's; a bad
file stops the start with exit 2 and `FILE:LINE` and the key on stderr, before anything is
made; --print-config prints TOML (read here with tomllib) that --config takes back. With
$NOTIFY_SOCKET set, Kelp sends READY=1 once it serves (the port answers right then) and
STOPPING=1 on SIGTERM, to a path socket and to an abstract one.

Each test starts its own Kelp and stops it by PID; the storage engine plays no part."""

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import time
import tomllib
import uuid

import pytest
from confluent_kafka.admin import AdminClient

import conftest
from test_tls import round_trip

pytestmark = conftest.ENGINE_NEUTRAL

KELP = str(conftest.KELP)


def file_cores():
    """The cores the file names: two when the machine has them (as the suite's Kelps), else
    core 0."""
    return [0, 1] if (os.cpu_count() or 1) >= 2 else [0]


def write_config(path, port, data_dir, metrics_port=None, extra=""):
    lines = [
        "# Kelp test configuration",
        f'listen = "127.0.0.1:{port}"',
        f'data-dir = "{data_dir}"',
        "group-initial-rebalance-delay-ms = 300",
    ]
    if metrics_port:
        lines.append(f'metrics-addr = "127.0.0.1:{metrics_port}"')
    # An array: the list form the file allows besides the flag's "0-1" text.
    lines.append(f"cores = {file_cores()}")
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@contextlib.contextmanager
def kelp(args, log, env=None):
    """A kelp process with these arguments (output to `log`), stopped by PID at the end."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([KELP, *args], stdout=out, stderr=out,
                                env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def serving(port, proc, log):
    try:
        conftest.wait_port(port, proc)
    except RuntimeError as e:
        pytest.fail(f"{e}\n--- kelp log ---\n{pathlib.Path(log).read_text(errors='replace')}")


def test_kelp_runs_from_the_file_alone(tmp_path):
    port, metrics = conftest.free_port(), conftest.free_port()
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kelp.toml", port, data, metrics)
    log = tmp_path / "kelp.log"
    with kelp(["--config", str(cfg)], log) as proc:
        serving(port, proc, log)
        round_trip({"bootstrap.servers": f"127.0.0.1:{port}"}, n=100)
        assert (data / "topics").is_dir(), "the file's data-dir holds the data"
        # The file's metrics address serves, with a shard on each of the file's cores.
        fams = conftest.metric_families(conftest.scrape(metrics))
        cores = {s.labels["core"] for s in fams["kelp_cache_bytes"].samples}
        assert cores == {str(c) for c in file_cores()}, cores
    assert proc.returncode == 0, log.read_text()


def test_command_line_overrides_the_file(tmp_path):
    file_port, cli_port = conftest.free_port(), conftest.free_port()
    cfg = write_config(tmp_path / "kelp.toml", file_port, tmp_path / "data")
    log = tmp_path / "kelp.log"
    with kelp(["--config", str(cfg), "--listen", f"127.0.0.1:{cli_port}"], log) as proc:
        serving(cli_port, proc, log)
        assert not conftest.accepts(file_port), "the file's port is not bound"
        round_trip({"bootstrap.servers": f"127.0.0.1:{cli_port}"}, n=10)


@pytest.mark.parametrize("extra,key,says", [
    ("\n# typo\ncache-bytes-per-cor = 1\n", "cache-bytes-per-cor",
     "unknown setting (did you mean 'cache-bytes-per-core'?)"),
    ('fsync = "sometimes"\n', "fsync", "bad value 'sometimes'"),
    ("advertise-shards = 1\n", "advertise-shards", "a switch takes true or false"),
], ids=["unknown-key", "bad-value", "switch-not-bool"])
def test_a_bad_file_stops_the_start(tmp_path, extra, key, says):
    port, metrics = conftest.free_port(), conftest.free_port()
    data = tmp_path / "never-made"
    cfg = write_config(tmp_path / "kelp.toml", port, data, metrics, extra)
    line = next(i for i, text in enumerate(cfg.read_text().splitlines(), 1)
                if text.startswith(f"{key} ="))
    r = subprocess.run([KELP, "--config", str(cfg)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert f"{cfg}:{line}: key '{key}': " in r.stderr, r.stderr
    assert says in r.stderr, r.stderr
    assert r.stdout == ""
    # Nothing was started: no data dir made, and the ports are free.
    assert not data.exists()
    assert not conftest.accepts(port) and not conftest.accepts(metrics)


def test_a_syntax_error_or_missing_file_stops_the_start(tmp_path):
    cfg = tmp_path / "kelp.toml"
    cfg.write_text('listen = "127.0.0.1:1"\ndata-dir = \n')
    r = subprocess.run([KELP, "--config", str(cfg)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and f"{cfg}:2: TOML syntax error" in r.stderr, r.stderr
    missing = tmp_path / "nope.toml"
    r = subprocess.run([KELP, "--config", str(missing)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and f"cannot read config file {missing}" in r.stderr, r.stderr


def print_config(*args):
    r = subprocess.run([KELP, *args, "--print-config"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_print_config_round_trips(tmp_path):
    port, cli_port = conftest.free_port(), conftest.free_port()
    data = tmp_path / "data"
    cfg = write_config(tmp_path / "kelp.toml", port, data,
                       extra='sasl-enabled-mechanisms = ["PLAIN", "SCRAM-SHA-512"]\n')
    text = print_config("--config", str(cfg), "--listen", f"127.0.0.1:{cli_port}")
    printed = tomllib.loads(text)
    assert printed["listen"] == f"127.0.0.1:{cli_port}"
    assert printed["data-dir"] == str(data)
    assert printed["sasl-enabled-mechanisms"] == "PLAIN,SCRAM-SHA-512"
    assert printed["cache-bytes-per-core"] == 512 * 1024 * 1024
    assert printed["advertise-shards"] is False
    assert "seaweedmq-master" not in printed
    by_key = {l.lstrip("# ").split(" ")[0]: l for l in text.splitlines() if " = " in l}
    assert by_key["listen"].endswith("# command line")
    assert by_key["data-dir"].endswith("# file")
    assert by_key["fsync"].endswith("# default")
    assert by_key["seaweedmq-master"] == "# seaweedmq-master =   (unset)"
    assert not data.exists(), "--print-config starts nothing"
    # Fed back, it gives the same settings (now all from the file).
    back = tmp_path / "printed.toml"
    back.write_text(text)
    again = print_config("--config", str(back))
    assert tomllib.loads(again) == printed
    assert "# command line" not in again
    # Without --config too.
    assert tomllib.loads(print_config())["listen"] == "0.0.0.0:9092"


def notify_socket(tmp_path, abstract):
    """A bound unix datagram socket and the $NOTIFY_SOCKET value naming it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"kelp-e2e-notify-{uuid.uuid4().hex}"
        s.bind("\0" + name)
        return s, "@" + name
    path = str(tmp_path / "notify.sock")
    s.bind(path)
    return s, path


def receive(sock, proc, timeout=30):
    """The next datagram, waiting while kelp runs (one sent just before it exited is still
    queued, so the socket is read once more after that)."""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        exited = proc.poll() is not None
        try:
            return sock.recv(4096).decode()
        except socket.timeout:
            if exited:
                raise AssertionError(f"kelp exited ({proc.returncode}) without notifying")
    raise AssertionError("no notification within the deadline")


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_sd_notify_ready_and_stopping(tmp_path, abstract):
    port = conftest.free_port()
    cfg = write_config(tmp_path / "kelp.toml", port, tmp_path / "data")
    sock, address = notify_socket(tmp_path, abstract)
    log = tmp_path / "kelp.log"
    with sock, kelp(["--config", str(cfg)], log, env={"NOTIFY_SOCKET": address}) as proc:
        ready = receive(sock, proc)
        # READY=1 comes once every shard serves: the port answers at once, no retry.
        assert conftest.answers_api_versions(port, timeout=5), ready
        fields = dict(l.split("=", 1) for l in ready.splitlines() if "=" in l)
        assert fields.get("READY") == "1", ready
        assert f"127.0.0.1:{port}" in fields.get("STATUS", ""), ready
        topics = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        assert topics.brokers, "a metadata round trip works"
        os.kill(proc.pid, signal.SIGTERM)
        stopping = receive(sock, proc)
        assert "STOPPING=1" in stopping.splitlines(), stopping
        assert proc.wait(timeout=15) == 0, log.read_text()
