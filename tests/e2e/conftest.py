"""Broker fixtures of the end-to-end suite.

The broker under test is either
  * an external one, when KELP_BOOTSTRAP=host:port is set: e.g. a real Apache Kafka started with
    `scripts/kafka.sh start 19092` (that is how the assertions of this suite are validated), or a
    Kelp started by hand; or
  * the Kelp binary ${KELP_BIN:-target/release/kelp}, started once per session on a free
    127.0.0.1 port with in-memory storage, a temp data dir and a short initial rebalance delay
    (`--cores 0-1` when the machine has two cores or more; KELP_CORES overrides, KELP_CORES=none
    passes none), and stopped by
    PID at the end. If it dies, the next test starts a new one (and the test that saw it die
    fails in teardown). A failing test gets the broker log lines written during it printed in
    its report.

With KELP_ADVERTISE_SHARDS=1 the Kelp brokers run with --advertise-shards (each shard core a
node on its own port, --shard-base-port chosen free).

Tests take the function-scoped `broker` fixture: `.bootstrap` ("host:port"), `.storage`,
`.restart()` (keeps data dir and port; skips the test on an external broker).
Every test uses its own fresh topic and group names, so tests do not depend on each other.
"""

import contextlib
import itertools
import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

import pytest

# SeaweedFS fixtures (seaweed_cluster, seaweed): the SeaweedMQ storage run and its tests use them.
from seaweed import seaweed, seaweed_cluster, node_failed  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
KELP = pathlib.Path(os.environ.get("KELP_BIN", ROOT / "target" / "release" / "kelp"))
STORAGE = os.environ.get("KELP_STORAGE", "local")  # the broker default
EXTERNAL = os.environ.get("KELP_BOOTSTRAP", "").strip()
ADVERTISE_SHARDS = os.environ.get("KELP_ADVERTISE_SHARDS") == "1"
REBALANCE_DELAY_MS = 300
LOG_TAIL_BYTES = 20000


def require(ok, what):
    """Skips a test whose client is missing, or fails it under scripts/test.sh
    (KELP_REQUIRE_CLIENTS=1), where every client must be installed."""
    if ok:
        return
    if os.environ.get("KELP_REQUIRE_CLIENTS") == "1":
        pytest.fail(f"missing test dependency: {what} (scripts/install-deps.sh)")
    pytest.skip(f"missing test dependency: {what}")


def kafkajs_dir():
    """tests/node with kafkajs installed from its package-lock.json (npm ci on first use)."""
    require(shutil.which("node") is not None and shutil.which("npm") is not None, "node/npm")
    node = ROOT / "tests/node"
    if not (node / "node_modules/kafkajs").exists():
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=node,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    return node


_handed_out = set()


CACHE = pathlib.Path(os.environ.get("KELP_CACHE", pathlib.Path.home() / ".cache/kelp"))
# kafka-clients 4.x and its codecs (scripts/install-deps.sh).
CLIENT_JARS = pathlib.Path(os.environ.get("KELP_JARS", CACHE / "jars/clients"))
# The whole Apache Kafka (its CLI tools: kafka-configs, kafka-acls).
KAFKA_JARS = CACHE / "jars/kafka"


def java_round_trip(tmp_path, bootstrap, topic, n, config=None, timeout=600, jvm=()):
    """Compiles tests/java/ClientRoundTrip.java and runs it against `bootstrap` (`config`: a
    client properties file, e.g. TLS or SASL settings; `jvm`: more JVM options); returns the
    finished process."""
    import glob
    import shutil
    require(shutil.which("java") is not None and shutil.which("javac") is not None, "java, javac")
    jars = sorted(glob.glob(str(CLIENT_JARS / "*.jar")))
    require(any("kafka-clients-4" in j for j in jars), f"kafka-clients 4.x jars in {CLIENT_JARS}")
    cp = os.pathsep.join(jars)
    classes = tmp_path / "classes"
    classes.mkdir(exist_ok=True)
    comp = subprocess.run(["javac", "-d", str(classes), "-cp", cp,
                           str(ROOT / "tests/java/ClientRoundTrip.java")],
                          capture_output=True, text=True, timeout=180)
    assert comp.returncode == 0, f"javac failed:\n{comp.stdout}\n{comp.stderr}"
    props = [f"-Dkelp.client.config={config}"] if config else []
    return subprocess.run(
        ["java", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", *props, *jvm,
         "-cp", os.pathsep.join([str(classes), cp]), "ClientRoundTrip", bootstrap, topic, str(n)],
        capture_output=True, text=True, timeout=timeout)


def kafka_tool(main_class, *args, timeout=120):
    """Runs one of Apache Kafka's CLI tools (e.g. kafka.admin.ConfigCommand, what
    kafka-configs.sh runs) from the jars scripts/install-deps.sh fetched."""
    import shutil
    require(shutil.which("java") is not None, "java")
    require(KAFKA_JARS.is_dir() and any(KAFKA_JARS.glob("kafka_2.13-*.jar")),
            f"Apache Kafka jars in {KAFKA_JARS}")
    log4j = CACHE / "jars/kafka-log4j2-tools.xml"
    opts = [f"-Dlog4j2.configurationFile={log4j}"] if log4j.exists() else []
    return subprocess.run(["java", "-Xmx256m", *opts, "-cp", str(KAFKA_JARS / "*"), main_class,
                           *args], capture_output=True, text=True, timeout=timeout)


# scripts/test.sh runs two passes of this suite side by side, each with KELP_E2E_LANE set
# (0 or 1): a pass takes ports only from its own blocks of 64 (every other block), so neither
# hands a Kelp it starts a port the other one picked a moment before.
_LANE = os.environ.get("KELP_E2E_LANE")


def _in_lane(p, n=2):
    """True if ports p .. p + n - 1 all lie in this pass's blocks (always, with no lane)."""
    if _LANE is None:
        return True
    return (p // 64) % 2 == int(_LANE) and p % 64 + n <= 64


def free_port():
    """A port free now that this run has not handed out before: the kernel may give the same
    ephemeral port to two binds in a row, and a Kelp whose listener and metrics port were
    the same one could not start."""
    for _ in range(400):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if _in_lane(p) and p not in _handed_out and p + 1 not in _handed_out:
            _handed_out.add(p)
            return p
    raise RuntimeError("no free port not handed out before")


def scrape(port):
    """The text of Kelp's /metrics on 127.0.0.1:port (checks status and content type)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        return r.read().decode()


def metric_families(text):
    """The scraped metric families by name, parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample_total(fams, fam, suffix="", **labels):
    """Sum over the shards of family `fam`'s samples named fam + suffix with these labels."""
    return sum(s.value for s in fams[fam].samples
               if s.name == fam + suffix and all(s.labels.get(k) == v for k, v in labels.items()))


def free_port_run(n):
    """A port p with p .. p + n - 1 all free and not handed out before (a listener's port
    and, after it, its shards' own ports with --advertise-shards)."""
    for _ in range(50):
        p = free_port()
        if not _in_lane(p, n):
            continue
        socks = [socket.socket() for _ in range(n)]
        try:
            for i, sk in enumerate(socks):
                if i and p + i in _handed_out:
                    raise OSError("handed out")
                sk.bind(("127.0.0.1", p + i))
            _handed_out.update(p + i for i in range(n))
            return p
        except OSError:
            continue
        finally:
            for sk in socks:
                sk.close()
    raise RuntimeError(f"no {n} consecutive free ports")


def free_port_pair():
    """A port p with p and p + 1 both free (the two shards' own ports, --advertise-shards)."""
    return free_port_run(2)


def answers_api_versions(port, timeout=0.5):
    """True when a broker on the port answers an ApiVersions v0 request. A bare connect is not
    enough: right after a restart the old process's listener can still accept connections
    (io_uring teardown) without anyone serving them."""
    req = struct.pack(">hhih", 18, 0, 1, -1)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(req)) + req)
            head = s.recv(8)
            return len(head) == 8 and struct.unpack(">ii", head)[1] == 1
    except OSError:
        return False


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_port(port, proc, timeout=25.0, tls=False):
    """Until Kelp answers ApiVersions on `port` (with `tls`: accepts connections there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kelp exited early with {proc.returncode}")
        if accepts(port) if tls else answers_api_versions(port):
            return
        time.sleep(0.05)
    raise RuntimeError(f"kelp did not serve on {port} within {timeout}s")


def default_cores():
    """--cores for the broker: KELP_CORES if set ("none": pass no --cores), else 0-1 on a
    machine with two cores or more."""
    if os.environ.get("KELP_CORES"):
        v = os.environ["KELP_CORES"].strip()
        return None if v == "none" else v
    n = os.cpu_count() or 1
    return "0-1" if n >= 2 else None


# Kelps over one SeaweedMQ are nodes of one cluster and must not share a node id (a second
# node with a live node's id is refused): every Broker of the suite gets its own.
_next_node_id = itertools.count()


class Broker:
    """A kelp process this suite runs; restart() keeps the data dir (and port)."""

    external = False

    def __init__(self, data_dir, extra_args=(), seaweed=None, advertise_shards=None):
        self.data_dir = data_dir
        # KELP_ADVERTISE_SHARDS=1 (a pass of scripts/test.sh): every shard its own node and port.
        if advertise_shards is None:
            advertise_shards = ADVERTISE_SHARDS
        self.shard_base_port = free_port_pair() if advertise_shards else None
        # With --storage seaweedmq: the SeaweedFS cluster the data goes to.
        self.seaweed = seaweed
        self.port = free_port()
        self.extra_args = list(extra_args)
        self.node_id = next(_next_node_id)
        self.proc = None
        self.log_path = os.path.join(data_dir, "kelp.log")
        self.log = open(self.log_path, "ab")
        self.storage = STORAGE

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def cluster_id(self):
        """The --cluster-id: on SeaweedMQ each Kelp of this suite is a cluster of its own
        unless a test passes another's id (test_cluster.py joins the suite's Kelp)."""
        if "--cluster-id" in self.extra_args:
            return self.extra_args[self.extra_args.index("--cluster-id") + 1]
        return f"e2e-{self.node_id}"

    @property
    def kafka_node_id(self):
        """The --node-id this Kelp runs with (the first shard's id with --advertise-shards)."""
        if "--node-id" in self.extra_args:
            return int(self.extra_args[self.extra_args.index("--node-id") + 1])
        return self.node_id if STORAGE == "seaweedmq" else 0

    def args(self):
        args = [
            str(KELP),
            "--listen", f"127.0.0.1:{self.port}",
            "--advertised-host", "127.0.0.1",
            "--storage", STORAGE,
            "--data-dir", self.data_dir,
            "--group-initial-rebalance-delay-ms", str(REBALANCE_DELAY_MS),
            "--default-partitions", "1",
        ]
        cores = default_cores()
        if cores:
            args += ["--cores", cores]
        if self.shard_base_port:
            args += ["--advertise-shards", "--shard-base-port", str(self.shard_base_port)]
        if os.environ.get("KELP_LOG_LEVEL"):  # e.g. "info,kelp::forwarder=debug"
            args += ["--log-level", os.environ["KELP_LOG_LEVEL"]]
        if STORAGE == "seaweedmq" and "--node-id" not in self.extra_args:
            args += ["--node-id", str(self.node_id)]
        if STORAGE == "seaweedmq" and "--cluster-id" not in self.extra_args:
            args += ["--cluster-id", self.cluster_id]
        if STORAGE == "seaweedmq":
            args += ["--seaweedmq-master", self.seaweed.master,
                     # topics made outside Kelp show up in Metadata quickly
                     "--seaweedmq-topic-refresh-ms", "500"]
            if (os.cpu_count() or 1) >= 2:
                args += ["--forwarder-core", "1"]
        return args + self.extra_args

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        if not KELP.exists():
            pytest.fail(f"{KELP} not built (cargo build --release)")
        args = self.args()
        self.log.write(f"\n=== e2e: starting {' '.join(args)}\n".encode())
        self.log.flush()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        try:
            wait_port(self.port, self.proc,
                      tls="SSL" in self.extra_args and "--security-protocol" in self.extra_args)
        except RuntimeError as e:
            self.stop()
            pytest.fail(f"{e}\n--- kelp log ---\n{self.log_tail()}")

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

    def log_size(self):
        self.log.flush()
        return os.path.getsize(self.log_path)

    def log_tail(self, since=0):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            f.seek(max(since, self.log_size() - LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")

    def sighup(self, expect, timeout=10):
        """Sends SIGHUP (reload certificates, key sets) and waits for `expect` in the log."""
        since = self.log_size()
        os.kill(self.proc.pid, signal.SIGHUP)
        deadline = time.time() + timeout
        while expect not in self.log_tail(since) and time.time() < deadline:
            time.sleep(0.05)
        assert expect in self.log_tail(since), self.log_tail(since)


class ExternalBroker:
    """The broker named by KELP_BOOTSTRAP; the suite neither starts nor stops it."""

    external = True
    storage = "external"
    proc = None

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        host, _, port = bootstrap.rpartition(":")
        self.host, self.port = host, int(port)

    def alive(self):
        return True

    def restart(self):
        pytest.skip("KELP_BOOTSTRAP: the suite cannot restart an external broker")

    def log_size(self):
        return 0

    def log_tail(self, since=0):
        return ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@contextlib.contextmanager
def running_broker(cls, prefix, extra_args=(), seaweed=None):
    """A started `cls` broker in a fresh temporary data dir, stopped by PID at the end."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        b = cls(d, extra_args, seaweed=seaweed)
        b.start()
        try:
            yield b
        finally:
            b.stop()
            b.log.close()


# For suites whose tests start Kelps of their own, choosing --advertise-shards per test: the
# suite's --advertise-shards pass would only repeat the local pass, and the memory pass too
# (security is the same code on every engine; the engines' record stores are covered on local
# storage and SeaweedMQ). They run on the local and SeaweedMQ passes.
OWN_KELPS = pytest.mark.skipif(
    bool(EXTERNAL) or ADVERTISE_SHARDS or STORAGE == "memory",
    reason="starts Kelps of its own: runs on the local and SeaweedMQ passes")

# For suites of Kelps of their own whose subject stores nothing (TLS handshakes and
# certificates, OAUTHBEARER tokens): the storage engine plays no part, so the local pass
# alone runs them (the SeaweedMQ pass would repeat minutes of the same checks).
ENGINE_NEUTRAL = pytest.mark.skipif(
    bool(EXTERNAL) or ADVERTISE_SHARDS or STORAGE != "local",
    reason="starts Kelps of its own and stores nothing: runs on the local pass")


@pytest.fixture
def sw(request):
    """The suite's SeaweedFS on the seaweedmq pass, else None (for Kelps a test starts)."""
    return request.getfixturevalue("seaweed_cluster") if STORAGE == "seaweedmq" else None


@pytest.fixture(scope="session")
def broker_process(request):
    if EXTERNAL:
        yield ExternalBroker(EXTERNAL)
        return
    sw = request.getfixturevalue("seaweed_cluster") if STORAGE == "seaweedmq" else None
    with running_broker(Broker, "kelp-e2e-", seaweed=sw) as b:
        yield b


@pytest.fixture
def broker(broker_process, request):
    b = broker_process
    if not b.alive():
        # An earlier test killed it (that test already failed); give this one a fresh broker.
        b.log.write(b"\n=== e2e: broker was dead before this test; restarting\n")
        b.start()
    since = b.log_size()
    yield b
    died = not b.alive()
    if (node_failed(request) or died) and not b.external:
        print(f"--- kelp log during {request.node.name} ({b.log_path}) ---")
        print(b.log_tail(since) or "(nothing logged)")
    if died:
        code = b.proc.returncode if b.proc else None
        pytest.fail(f"kelp exited during {request.node.name} (exit {code})")


def pytest_configure(config):
    # kafka-python 3 loads its protocol schemas with the deprecated importlib.resources calls.
    config.addinivalue_line("filterwarnings", "ignore:read_text is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")
