"""A real SeaweedFS (master, volume, filer, mq broker) for the end-to-end tests that store Kelp's
data in SeaweedMQ, and `smqctl`, the storage client's CLI, to look at what landed there.

Everything wraps scripts/seaweedfs.sh (see its header): processes run on 127.0.0.1, each with
its PID file and log in the cluster's directory, and are stopped by PID.

    from seaweed import Seaweed, free_baseport, smqctl

    with running_seaweed() as sw:          # or the `seaweed` fixture below
        sw.master                          # "127.0.0.1:BASEPORT"
        sw.restart_broker(kill=True)       # returns once the broker serves again
        smqctl(sw.master, "range", "--topic", "t", "--partition", "0")   # -> [dict, ...]

Fixtures (import them into a test module: `from seaweed import seaweed, seaweed_cluster`):
  * `seaweed_cluster` (session): one cluster for the whole run, stopped at the end;
  * `seaweed` (function): that cluster, with its broker started again if an earlier test left it
    stopped; prints the broker log written during a failed test.
KELP_SEAWEED_MASTER=host:port uses an already running SeaweedFS instead (restart/stop of its
broker then skip the test).

Facts about weed 4.48 that tests must allow for (measured; see scripts/seaweedfs.sh):
  * a start takes ~5 s; a broker restart 1.7-4.5 s until it serves;
  * the broker does NOT flush its in-memory log buffer on SIGTERM (nor SIGKILL): what was
    published in the last flush interval (5 s) is lost, and the offsets of lost records are
    handed out again after the restart (offsets continue from the 2-s checkpoint);
  * if a client calls FetchMessage/GetPartitionRangeInfo on a partition while the restarted
    broker does not yet hold the balancer lock, PublishMessage to that partition fails with
    "failed to find leader for topic partition" for ~30 s (the broker's topic cache TTL).
"""

import contextlib
import json
import os
import pathlib
import random
import socket
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "seaweedfs.sh"
EXTERNAL_MASTER = os.environ.get("KELP_SEAWEED_MASTER", "").strip()
# Bounds for the script calls (it has its own bounded waits; these only catch a hang).
START_TIMEOUT = 180
STOP_TIMEOUT = 120


def cargo_target_dir():
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")


def smqctl_bin():
    return pathlib.Path(os.environ.get("SMQCTL_BIN") or cargo_target_dir() / "release" / "smqctl")


class SeaweedError(RuntimeError):
    pass


class SmqctlError(RuntimeError):
    pass


def smqctl(master, *args, timeout=60):
    """Runs `smqctl --master MASTER ARGS...` and returns its JSON lines as dicts. Raises
    SmqctlError (with stderr) when it exits non-zero; fails the test when it is not built."""
    exe = smqctl_bin()
    if not exe.exists():
        pytest.fail(f"{exe} not built (cargo build --release -p ... smqctl, or set SMQCTL_BIN)")
    cmd = [str(exe), "--master", master, *[str(a) for a in args]]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise SmqctlError(f"{' '.join(cmd)}: no answer within {timeout}s") from e
    if r.returncode != 0:
        raise SmqctlError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    out = []
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise SmqctlError(f"{' '.join(cmd)}: not a JSON line: {line[:300]!r}") from e
    return out


def _port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_baseport(tries=200):
    """A BASEPORT whose 7 ports (BASEPORT..+3, BASEPORT+10000..+10002) are free. Drawn from
    10000-22000, so that the gRPC ports stay below Linux's ephemeral range (32768-)."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(10000, 22000)
        ports = [base, base + 1, base + 2, base + 3, base + 10000, base + 10001, base + 10002]
        if all(_port_free(p) for p in ports):
            return base
    raise SeaweedError("no free BASEPORT found")


def install():
    """scripts/seaweedfs.sh install (idempotent, fast when weed is present)."""
    r = subprocess.run([str(SCRIPT), "install"], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SeaweedError(f"seaweedfs.sh install failed: {r.stderr.strip()[-3000:]}")


class Seaweed:
    """A SeaweedFS cluster run by scripts/seaweedfs.sh in `dir` on BASEPORT..BASEPORT+3."""

    external = False

    def __init__(self, dir, baseport):
        self.dir = str(dir)
        self.baseport = int(baseport)
        self.gateway_port = None

    @property
    def master(self):
        return f"127.0.0.1:{self.baseport}"

    @property
    def filer(self):
        return f"127.0.0.1:{self.baseport + 2}"

    @property
    def broker(self):
        """The mq broker's gRPC address."""
        return f"127.0.0.1:{self.baseport + 3}"

    @property
    def gateway(self):
        """host:port of SeaweedFS's own Kafka gateway, after gateway_start()."""
        return f"127.0.0.1:{self.gateway_port}" if self.gateway_port else None

    def _sh(self, *args, timeout=START_TIMEOUT):
        cmd = [str(SCRIPT), *[str(a) for a in args]]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise SeaweedError(f"{' '.join(cmd)}: still running after {timeout}s") from e
        if r.returncode != 0:
            raise SeaweedError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr.strip()[-4000:]}")
        return r.stdout.strip()

    def start(self):
        out = self._sh("start", self.dir, self.baseport)
        assert out.splitlines()[-1] == self.master, out
        return self

    def stop(self, kill=False):
        """Stops everything (gateway included). kill=True: SIGKILL at once (fast; the filer
        otherwise takes ~17 s for its graceful stop)."""
        if os.path.exists(os.path.join(self.dir, "ports")):
            self._sh("stop", self.dir, *(["--kill"] if kill else []), timeout=STOP_TIMEOUT)
        self.gateway_port = None

    def restart_broker(self, kill=False):
        """SIGTERM (kill=True: SIGKILL) the mq broker, start it on the same port, return once it
        serves again."""
        self._sh("restart-broker", self.dir, *(["--kill"] if kill else []))

    def stop_broker(self, kill=False):
        self._sh("stop-broker", self.dir, *(["--kill"] if kill else []), timeout=STOP_TIMEOUT)

    def start_broker(self):
        self._sh("start-broker", self.dir)

    def gateway_start(self, port=9093):
        """SeaweedFS's Go Kafka gateway on 127.0.0.1:port. weed 4.48 advertises port 9093 in
        Metadata whatever the port, so only 9093 works for clients that follow Metadata."""
        out = self._sh("gateway-start", self.dir, port)
        self.gateway_port = int(port)
        return out.splitlines()[-1]

    def gateway_stop(self):
        self._sh("gateway-stop", self.dir, timeout=STOP_TIMEOUT)
        self.gateway_port = None

    def status(self):
        """{name: alive} for every process started in dir."""
        out = self._sh("status", self.dir, timeout=30)
        res = {}
        for line in out.splitlines():
            name, _pid, state = line.split()
            res[name] = state == "alive"
        return res

    def broker_alive(self):
        return self.status().get("broker", False)

    def log_path(self, name="broker"):
        return os.path.join(self.dir, f"{name}.log")

    def log_size(self, name="broker"):
        try:
            return os.path.getsize(self.log_path(name))
        except OSError:
            return 0

    def log_tail(self, name="broker", since=0, limit=20000):
        try:
            with open(self.log_path(name), "rb") as f:
                f.seek(since)
                data = f.read()
        except OSError:
            return ""
        return data[-limit:].decode(errors="replace")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class ExternalSeaweed(Seaweed):
    """A SeaweedFS this suite did not start (KELP_SEAWEED_MASTER): nothing to start or stop,
    and tests that restart or stop its processes are skipped."""

    external = True

    def __init__(self, master):
        host, port = master.rsplit(":", 1)
        super().__init__(dir="", baseport=int(port))
        self._host = host

    @property
    def master(self):
        return f"{self._host}:{self.baseport}"

    def start(self):
        return self

    def stop(self, kill=False):
        pass

    def _skip(self, *_a, **_k):
        pytest.skip("needs a SeaweedFS started by the suite (KELP_SEAWEED_MASTER is set)")

    restart_broker = stop_broker = start_broker = gateway_start = gateway_stop = _skip

    def status(self):
        return {}

    def broker_alive(self):
        return True

    def log_tail(self, name="broker", since=0, limit=20000):
        return ""


@contextlib.contextmanager
def running_seaweed(prefix="kelp-seaweed-", baseport=None):
    """A started cluster in a fresh temporary dir, stopped (SIGKILL; nothing is kept) at the end."""
    if EXTERNAL_MASTER:
        yield ExternalSeaweed(EXTERNAL_MASTER)
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        sw = Seaweed(d, baseport or free_baseport())
        try:
            sw.start()
        except SeaweedError as e:
            sw.stop(kill=True)
            pytest.fail(str(e))
        try:
            yield sw
        finally:
            sw.stop(kill=True)


@pytest.fixture(scope="session")
def seaweed_cluster():
    if not EXTERNAL_MASTER:
        try:
            install()
        except SeaweedError as e:
            pytest.fail(str(e))
    with running_seaweed() as sw:
        yield sw


def node_failed(request):
    """Whether the running test failed in setup or call (reports kept by conftest's hook)."""
    return any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )


@pytest.fixture
def seaweed(seaweed_cluster, request):
    sw = seaweed_cluster
    if not sw.external and not sw.broker_alive():
        # an earlier test stopped the broker (and failed before starting it again)
        sw.start_broker()
    since = sw.log_size()
    yield sw
    if node_failed(request) and not sw.external:
        print(f"--- mq.broker log during {request.node.name} ({sw.log_path()}) ---")
        print(sw.log_tail("broker", since) or "(nothing logged)")
