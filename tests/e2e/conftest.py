"""Minimal broker fixture for the group/idempotence end-to-end tests.

Stand-in until the shared tests/e2e/conftest.py lands on main: starts target/release/kelp on a
free 127.0.0.1 port with in-memory storage and a short initial rebalance delay, waits for the
port, and stops it by PID afterwards.
"""

import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KELP = pathlib.Path(os.environ.get("KELP_BIN", ROOT / "target" / "release" / "kelp"))
STORAGE = os.environ.get("KELP_STORAGE", "memory")
REBALANCE_DELAY_MS = 300


def require(ok, what):
    """Skips a test whose client is missing, or fails it under scripts/test.sh
    (KELP_REQUIRE_CLIENTS=1), where every client must be installed."""
    if ok:
        return
    if os.environ.get("KELP_REQUIRE_CLIENTS") == "1":
        pytest.fail(f"missing test dependency: {what} (scripts/install-deps.sh)")
    pytest.skip(f"missing test dependency: {what}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kelp exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"kelp did not listen on {port} within {timeout}s")


class Broker:
    """A running kelp process; restart() keeps the data dir (and port)."""

    def __init__(self, data_dir, extra_args=()):
        self.data_dir = data_dir
        self.port = free_port()
        self.extra_args = list(extra_args)
        self.proc = None
        self.log = open(os.path.join(data_dir, "kelp.log"), "ab")
        self.storage = STORAGE

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        if not KELP.exists():
            pytest.fail(f"{KELP} not built (cargo build --release)")
        args = [
            str(KELP),
            "--listen", f"127.0.0.1:{self.port}",
            "--advertised-host", "127.0.0.1",
            "--storage", STORAGE,
            "--data-dir", self.data_dir,
            "--group-initial-rebalance-delay-ms", str(REBALANCE_DELAY_MS),
            "--default-partitions", "1",
        ] + self.extra_args
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        wait_port(self.port, self.proc)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def restart(self):
        self.stop()
        self.start()


@pytest.fixture
def broker():
    with tempfile.TemporaryDirectory(prefix="kelp-e2e-") as d:
        b = Broker(d)
        b.start()
        try:
            yield b
        finally:
            b.stop()
            b.log.close()
