#!/usr/bin/env python3
"""Soak: Kelp on all its cores under mixed real-client load for a given time, sampling RSS,
/metrics and errors; fails on any crash, on RSS above the documented memory model, or on a
cache over its budget. Run through perf/soak.sh (which builds nothing: it uses KELP_BIN).

Load, all at once, for the whole run:
  - Java ProducerPerformance (Apache Kafka's own client), acks=all and acks=1, in a loop;
    every other acks=all run is transactional (a commit every 200 ms: Kafka 4's client runs
    transactions v2, Produce v12 and EndTxn v5);
  - confluent-kafka consumers in one group that join, consume a while, leave and come back;
    two more the same way in a KIP-848 group (group.protocol=consumer, one subscribing by
    regex, resolved by the broker);
  - a confluent-kafka transactional producer committing two rounds in three and aborting the
    third (a new transactional id every 20 rounds) to a compacted topic (compact,delete, so the
    log cleaner compacts committed transactions and drops aborted ones and their markers as
    they go), a read_committed consumer at its end and another reading it from the start again
    every minute: neither may ever see an aborted record;
  - admin calls: create/describe/alter/delete topics, list/describe groups, metadata;
  - a slow consumer (reads a few KiB per second of its fetches) and a stalled one (never
    reads; must be closed by the write timeout, then it comes back);
  - garbage: random bytes, the 21-byte oversized-array Metadata frame, absurd and announced-
    only frame lengths, valid headers with random bodies (share-group keys 76-79 too), idle
    connections;
  - a share group (KIP-932, ShareWorkload): a producer writing to soak-share and two Java
    KafkaShareConsumer members (perf/ShareSoak.java, explicit acknowledgement: ACCEPT, some
    RELEASE and REJECT), one of them killed with SIGKILL and restarted every 25-45 s; at the
    end every record produced must have been accepted or rejected exactly once, none lost,
    none delivered after that, delivery counts <= 5 and above 1 only after a release or a
    kill (needs the 4.2 client jars scripts/install-deps.sh puts in jars/clients-share).

Prints one line per sample and a summary; exit 0 only if the broker stayed up and inside
the model for the whole run.
"""

import argparse
import contextlib
import glob
import json
import os
import random
import signal
import socket
import struct
import itertools
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import kwire  # noqa: E402  (the e2e suite's wire helpers)

MIB = 1024 * 1024
# The model's fixed part (README "Memory"): binary, threads, malloc's slack (4 arenas x up to
# 16 MiB free each) and the in-memory indexes of the retained log.
FIXED_MIB = 96
STOP = threading.Event()
CHILDREN = []  # client processes, stopped by PID when the soak ends however it ends
COUNTS = {}
COUNTS_LOCK = threading.Lock()


def count(what, n=1):
    with COUNTS_LOCK:
        COUNTS[what] = COUNTS.get(what, 0) + n


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(mport):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        base = name.split("{", 1)[0]
        out.setdefault(base, []).append(float(value))
    return out


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def loop(name, body, pause=0.0):
    """Runs body() until STOP, counting errors instead of dying on them."""
    def run():
        while not STOP.is_set():
            try:
                body()
            except Exception as e:  # noqa: BLE001 - a soak counts failures, it does not stop
                count(f"{name}_errors")
                if os.environ.get("SOAK_VERBOSE"):
                    print(f"soak: {name}: {e!r}", flush=True)
                STOP.wait(1.0)
            if pause:
                STOP.wait(pause)
    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t


# --- load ----------------------------------------------------------------------------------

def java_producer(bs, jars, topic, acks, rate, logs):
    seconds = 60
    runs = itertools.count()

    def body():
        log = os.path.join(logs, f"producer-acks{acks}.log")
        txn = acks == "all" and next(runs) % 2 == 1
        extra = ["--transactional-id", f"soak-perf-{uuid.uuid4().hex[:6]}",
                 "--transaction-duration-ms", "200"] if txn else []
        with open(log, "ab") as f:
            p = subprocess.Popen(
                ["java", "-Xmx256m", "-cp", f"{jars}/*", "org.apache.kafka.tools.ProducerPerformance",
                 "--topic", topic, "--num-records", str(rate * seconds), "--record-size", "1000",
                 "--throughput", str(rate), *extra, "--producer-props", f"bootstrap.servers={bs}",
                 f"acks={acks}", "linger.ms=5", "batch.size=65536"],
                stdout=f, stderr=subprocess.STDOUT)
            CHILDREN.append(p)
            while p.poll() is None:
                if STOP.wait(0.5):
                    p.terminate()
                    p.wait(10)
                    return
        tail = open(log, "rb").read()[-2000:].decode(errors="replace")
        if p.returncode != 0 or "records sent" not in tail:
            raise RuntimeError(f"ProducerPerformance acks={acks} rc={p.returncode}")
        count("produce_txn_runs" if txn else f"produce_acks{acks}_runs")
    return loop(f"producer_acks{acks}", body)


def group_consumer(bs, topic, group, idx, kip848=False):
    from confluent_kafka import Consumer

    def body():
        conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "latest",
                "client.id": f"soak-c{idx}"}
        # The session timeout of a KIP-848 group is the broker's, not the client's.
        conf.update({"group.protocol": "consumer"} if kip848 else {"session.timeout.ms": 10000})
        c = Consumer(conf)
        c.subscribe([topic])
        until = time.time() + random.uniform(10, 40)
        try:
            while time.time() < until and not STOP.is_set():
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    count("consumed_848" if kip848 else "consumed")
        finally:
            c.close()
        count("group_leaves")
        STOP.wait(random.uniform(0, 5))
    return loop(f"consumer{idx}", body)


def transactional_producer(bs, topic):
    from confluent_kafka import Producer

    def body():
        p = Producer({"bootstrap.servers": bs, "transactional.id": f"soak-{uuid.uuid4().hex[:8]}",
                      "linger.ms": 5, "transaction.timeout.ms": 20000})
        p.init_transactions(30)
        for rnd in range(20):
            if STOP.is_set():
                break
            abort = rnd % 3 == 2
            p.begin_transaction()
            for i in range(100):
                p.produce(topic, key=str(i).encode(),
                          value=(b"abort-" if abort else b"keep-") + os.urandom(64))
            if abort:
                p.flush(30)
                p.abort_transaction(30)
                count("txn_aborts")
            else:
                p.commit_transaction(30)
                count("txn_commits")
    return loop("txn_producer", body)


def committed_reader(bs, topic, from_start=False):
    from confluent_kafka import Consumer

    def body():
        # From the start: a new group each time, so the cleaned log is read again.
        group = f"soak-txn-rescan-{uuid.uuid4().hex[:6]}" if from_start else "soak-txn-reader"
        c = Consumer({"bootstrap.servers": bs, "group.id": group,
                      "auto.offset.reset": "earliest" if from_start else "latest",
                      "isolation.level": "read_committed"})
        c.subscribe([topic])
        until = time.time() + 60
        try:
            while time.time() < until and not STOP.is_set():
                m = c.poll(0.5)
                if m is None or m.error() is not None:
                    continue
                if m.value().startswith(b"abort-"):
                    count("txn_aborted_seen")
                else:
                    count("txn_committed_rescanned" if from_start else "txn_committed_read")
        finally:
            c.close()
    return loop("txn_rescan" if from_start else "txn_reader", body)


def admin_calls(bs):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    admin = AdminClient({"bootstrap.servers": bs})

    def body():
        t = f"soak-admin-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(t, 3, 1)])[t].result(15)
        res = ConfigResource(ConfigResource.Type.TOPIC, t)
        admin.describe_configs([res])[res].result(15)
        admin.list_topics(timeout=10)
        groups = admin.list_consumer_groups().result(15)
        ids = [g.group_id for g in groups.valid][:5]
        if ids:
            for f in admin.describe_consumer_groups(ids).values():
                f.result(15)
        admin.delete_topics([t])[t].result(15)
        count("admin_rounds")
    return loop("admin", body, pause=2.0)


def fetch_frame(topic, corr, max_bytes):
    body = (kwire.i32(-1) + kwire.i32(200) + kwire.i32(1) + kwire.i32(max_bytes) + kwire.i8(0)
            + kwire.array([kwire.string(topic) + kwire.array(
                [kwire.i32(0) + kwire.i64(0) + kwire.i64(0) + kwire.i32(max_bytes)])]))
    return kwire.request_frame(1, 5, corr, body)


def slow_consumer(port, topic):
    def body():
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
            for corr in range(20):
                s.sendall(fetch_frame(topic, corr, 4 * MIB))
                (n,) = struct.unpack(">i", recv_exact(s, 4))
                left = n
                while left > 0 and not STOP.is_set():
                    left -= len(recv_exact(s, min(left, 64 * 1024)))
                    time.sleep(0.02)  # a few MiB/s at most
                count("slow_fetches")
                if STOP.is_set():
                    return
    return loop("slow_consumer", body)


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise ConnectionError("closed")
        out += got
    return out


def stalled_consumer(port, topic):
    import select

    def body():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            # Fetch again and again, never reading; once the socket buffers are full the
            # broker's write stalls and it must give up on us (write timeout): the reset
            # shows without reading.
            p = select.poll()
            p.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
            deadline = time.time() + 120
            corr = 0
            while time.time() < deadline and not STOP.is_set():
                corr += 1
                with contextlib.suppress(BlockingIOError):
                    s.send(fetch_frame(topic, corr, 64 * MIB))
                if p.poll(500):
                    count("stalled_closed_by_broker")
                    return
            if not STOP.is_set():
                raise RuntimeError("a stalled consumer was not closed within 120 s")
    return loop("stalled_consumer", body, pause=5.0)


GARBAGE_21 = bytes.fromhex("000000110003000100000001000372656c7fffffff")


def garbage(port):
    rnd = random.Random(7)

    def body():
        kind = rnd.randrange(5)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            if kind == 0:
                s.sendall(os.urandom(rnd.randrange(1, 4096)))
            elif kind == 1:
                s.sendall(GARBAGE_21)
            elif kind == 2:
                s.sendall(struct.pack(">i", rnd.choice([-1, 0, 5, 0x7FFFFFFF, 200 * MIB])))
            elif kind == 3:
                # A valid header (known api key and version) with a random body.
                api, ver = rnd.choice([(0, 9), (1, 11), (2, 7), (3, 12), (3, 1), (8, 8), (9, 8),
                                       (11, 7), (14, 5), (19, 7), (32, 4), (60, 1), (68, 1),
                                       (69, 1), (76, 1), (77, 1), (78, 1), (79, 1)])
                s.sendall(kwire.request_frame(api, ver, 1, os.urandom(rnd.randrange(0, 300))))
            else:
                # Announce 50 MB and dribble a little of it.
                s.sendall(struct.pack(">i", 50_000_000))
                for _ in range(5):
                    s.sendall(os.urandom(1000))
                    time.sleep(0.2)
            with contextlib.suppress(OSError):
                s.settimeout(2)
                s.recv(65536)
        count("garbage_conns")
    return loop("garbage", body, pause=0.2)


def idle_connections(port, n, keep):
    for _ in range(n):
        with contextlib.suppress(OSError):
            keep.append(socket.create_connection(("127.0.0.1", port), timeout=5))


# --- share groups (KIP-932) -----------------------------------------------------------------

class ShareWorkload:
    """A share group consuming a dedicated topic for the whole soak: a producer (confluent-kafka,
    acks=all, idempotent) writes SHARE_RATE records/s to it and remembers every (partition,
    offset) it was told; two JVMs of perf/ShareSoak.java, one KafkaShareConsumer each, explicit
    acknowledgement (mostly ACCEPT, some RELEASE at first delivery, some REJECT), commitSync after
    every poll. Member A lives all along; member B is killed with SIGKILL every 25-45 s (its
    acquired records come back) and started again. When the soak ends the producer stops and the
    members drain the topic (up to 60 s), then close. The members' logs (flushed before their
    acknowledgements leave) are then checked: every record produced was ACCEPTed (or REJECTed)
    with a confirmed acknowledgement exactly once, by one member; none lost (a record whose last
    acknowledgement left but whose answer was never logged, its member killed in between, counts
    as outcome unknown: the broker may have applied it); no delivery after
    the confirmed one (a rejected or accepted record never comes back); delivery counts at most
    5, rising by delivery, and above 1 only after a RELEASE, an unconfirmed acknowledgement or a
    kill."""

    TOPIC, GROUP = "soak-share", "soak-share-group"

    def __init__(self, bs, out, rate, jars):
        self.bs, self.rate, self.jars = bs, rate, jars
        self.dir = os.path.join(out, "share")
        os.makedirs(self.dir, exist_ok=True)
        self.stop_file = os.path.join(self.dir, "stop")
        self.produced = set()
        self.produce_errors = 0
        self.lock = threading.Lock()
        self.kills = []  # ms of every SIGKILL
        self.procs = {}  # name -> Popen of the running JVM
        self.cpu = {}  # pid -> last CPU seconds seen
        self.starts = 0
        self.cp = None
        self.producer_thread = None

    def compile(self):
        classes = os.path.join(self.dir, "classes")
        os.makedirs(classes, exist_ok=True)
        subprocess.run(["javac", "-d", classes, "-cp", f"{self.jars}/*",
                        os.path.join(ROOT, "perf", "ShareSoak.java")], check=True, timeout=300)
        self.cp = f"{classes}{os.pathsep}{self.jars}/*"

    def start_member(self, name, earliest=False):
        self.starts += 1
        gen = f"{name}{self.starts}"
        log = open(os.path.join(self.dir, f"member-{gen}.log"), "wb")
        err = open(os.path.join(self.dir, f"member-{gen}.err"), "wb")
        cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", self.cp, "ShareSoak",
               self.bs, self.GROUP, self.TOPIC, gen, "--stop-file", self.stop_file]
        if earliest:
            cmd.append("--earliest")
        p = subprocess.Popen(cmd, stdout=log, stderr=err)
        CHILDREN.append(p)
        self.procs[name] = p
        return p

    def sample_cpu(self):
        tick = os.sysconf("SC_CLK_TCK")
        for p in list(self.procs.values()):
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{p.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                self.cpu[p.pid] = (int(fields[11]) + int(fields[12])) / tick

    def start(self, admin):
        from confluent_kafka.admin import NewTopic
        retention = {"retention.bytes": str(128 * MIB), "segment.bytes": str(32 * MIB)}
        admin.create_topics([NewTopic(self.TOPIC, 4, 1, config=retention)])[self.TOPIC].result(15)
        self.compile()
        # A sets share.auto.offset.reset=earliest before it subscribes: nothing produced before
        # the group's first fetch is skipped.
        self.start_member("A", earliest=True)
        self.start_member("B", earliest=True)
        self.producer_thread = threading.Thread(target=self.produce, name="share_producer",
                                                daemon=True)
        self.producer_thread.start()
        threading.Thread(target=self.killer, name="share_killer", daemon=True).start()

    def produce(self):
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bs, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})

        def done(err, msg):
            with self.lock:
                if err is None:
                    self.produced.add((msg.partition(), msg.offset()))
                else:
                    self.produce_errors += 1
        n = 0
        step = max(1, self.rate // 10)
        while not STOP.is_set():
            t = time.time()
            for _ in range(step):
                with contextlib.suppress(BufferError):
                    p.produce(self.TOPIC, value=b"share-%d" % n, on_delivery=done)
                    n += 1
            p.poll(0)
            STOP.wait(max(0.0, 0.1 - (time.time() - t)))
        p.flush(30)

    def killer(self):
        rnd = random.Random(11)
        while not STOP.wait(rnd.uniform(25, 45)):
            b = self.procs["B"]
            self.sample_cpu()
            if b.poll() is None:
                b.kill()
                ms = time.time() * 1000  # the member runs no more code after this
                b.wait(10)
                self.kills.append(ms)
                with open(os.path.join(self.dir, "kills"), "a") as f:
                    f.write(f"{int(ms)} B{self.starts}\n")
            time.sleep(rnd.uniform(1, 3))
            self.start_member("B")
            count("share_member_restarts")

    def parse(self):
        """{(partition, offset): [[ms, dc, action, confirmed, member, partition, unknown], ...]}
        and the errors seen. `unknown`: the acknowledgement was sent (an A line) but no answer
        for its partition was logged (the member was killed in between, or commitSync threw):
        the broker may or may not have applied it."""
        deliveries, errors = {}, []
        for path in sorted(glob.glob(os.path.join(self.dir, "member-*.log"))):
            batch = {}  # member -> deliveries of its last poll, waiting for commitSync's answer
            ok = {}  # member -> partitions commitSync answered OK
            answered = {}  # member -> partitions commitSync answered at all
            sent = set()  # members whose last poll's acknowledgements left

            def settle(member):
                for d in batch.pop(member, []):
                    d[3] = d[5] in ok.get(member, set())
                    d[6] = member in sent and d[5] not in answered.get(member, set())
                ok.pop(member, None)
                answered.pop(member, None)
                sent.discard(member)
            with open(path, errors="replace") as f:
                for line in f:
                    w = line.split()
                    if len(w) < 3:
                        continue  # a line cut by SIGKILL
                    kind, member = w[0], w[1]
                    if kind == "D" and len(w) == 7:
                        if member in ok or member in sent:
                            settle(member)
                        part, off = int(w[3]), int(w[4])
                        d = [int(w[2]), int(w[5]), w[6], False, member, part, False]
                        deliveries.setdefault((part, off), []).append(d)
                        batch.setdefault(member, []).append(d)
                    elif kind == "A" and len(w) == 4:
                        sent.add(member)
                    elif kind == "C" and len(w) == 5:
                        ok.setdefault(member, set())
                        answered.setdefault(member, set()).add(int(w[3]))
                        if w[4] == "OK":
                            ok[member].add(int(w[3]))
                    elif kind == "E":
                        settle(member)
                        errors.append(line.strip())
            for member in list(batch):
                settle(member)  # the last poll: answered, or cut by SIGKILL before or after A
        return deliveries, errors

    @staticmethod
    def outcome(ds):
        """A record's deliveries, in order -> (its confirmed ACCEPT/REJECT deliveries, whether
        its last acknowledgement was an ACCEPT/REJECT that left with no answer logged: the
        broker may have applied it, and then the record never comes back)."""
        done = ("ACCEPT", "REJECT")
        terminal = [d for d in ds if d[3] and d[2] in done]
        return terminal, bool(ds) and ds[-1][6] and ds[-1][2] in done

    def pending(self, deliveries):
        with self.lock:
            produced = set(self.produced)
        left = 0
        for r in produced:
            terminal, unknown = self.outcome(
                sorted(deliveries.get(r, []), key=lambda d: (d[0], d[1])))
            left += not terminal and not unknown
        return left

    def finish(self):
        """After STOP: drains, stops the members, checks. Returns (counts, failures)."""
        if self.producer_thread:
            self.producer_thread.join(60)
        deadline = time.time() + 60
        while time.time() < deadline:
            left = self.pending(self.parse()[0])
            if left == 0:
                break
            time.sleep(2)
        self.sample_cpu()
        open(self.stop_file, "w").close()
        for p in self.procs.values():
            try:
                p.wait(45)
            except subprocess.TimeoutExpired:
                p.kill()
        return self.check()

    def check(self):
        deliveries, errors = self.parse()
        with self.lock:
            produced = set(self.produced)
        fails = []
        c = {"share_produced": len(produced), "share_produce_errors": self.produce_errors,
             "share_kills": len(self.kills), "share_member_errors": len(errors),
             "share_jvm_cpu_s": round(sum(self.cpu.values()), 1)}
        first_kill = min(self.kills) if self.kills else float("inf")
        n = {k: 0 for k in ("deliveries", "redelivered", "accepted", "rejected", "released",
                            "unconfirmed", "redelivered_after_kill", "lost", "max_dc",
                            "outcome_unknown")}
        bad = {k: [] for k in ("lost", "twice_terminal", "after_terminal", "dc_over_5",
                               "dc_order", "unexplained_redelivery", "not_produced")}
        for r, ds in deliveries.items():
            if r not in produced:
                bad["not_produced"].append(r)
        for r in produced:
            ds = sorted(deliveries.get(r, []), key=lambda d: (d[0], d[1]))
            n["deliveries"] += len(ds)
            terminal, unknown = self.outcome(ds)
            if not terminal and unknown:
                n["outcome_unknown"] += 1
            elif not terminal:
                bad["lost"].append(r)
            elif len(terminal) > 1 or len({d[4] for d in terminal}) > 1:
                bad["twice_terminal"].append((r, terminal))
            else:
                n["accepted" if terminal[0][2] == "ACCEPT" else "rejected"] += 1
                if any(d[1] > terminal[0][1] for d in ds):
                    bad["after_terminal"].append((r, ds))
            prev = None
            for d in ds:
                n["max_dc"] = max(n["max_dc"], d[1])
                n["released"] += d[3] and d[2] == "RELEASE"
                n["unconfirmed"] += not d[3]
                if d[1] > 5:
                    bad["dc_over_5"].append((r, d))
                if d[1] < 1 or (prev is not None and d[1] <= prev[1]):
                    bad["dc_order"].append((r, ds))
                if d[1] > 1:
                    n["redelivered"] += 1
                    # The delivery before: released or never confirmed; a kill can also hide
                    # it (acquired by the killed member but never logged).
                    if prev is not None and prev[1] == d[1] - 1 and (
                            not prev[3] or prev[2] == "RELEASE"):
                        pass
                    elif d[0] >= first_kill:
                        n["redelivered_after_kill"] += 1
                    else:
                        bad["unexplained_redelivery"].append((r, ds))
                prev = d
        c.update({f"share_{k}": v for k, v in n.items() if k != "lost"})
        for k, v in bad.items():
            c[f"share_bad_{k}"] = len(v)
            if v:
                fails.append(f"share group: {len(v)} {k.replace('_', ' ')}, e.g. {v[:3]}")
        if not produced or not c["share_accepted"]:
            fails.append("share group: nothing produced or accepted")
        for e in errors[:5]:
            print(f"soak: share member error: {e}")
        return c, fails


# --- the run -------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=360)
    ap.add_argument("--kelp", default=os.environ.get("KELP_BIN", os.path.join(ROOT, "target/release/kelp")))
    ap.add_argument("--jars", default=os.path.expanduser("~/.cache/kelp/jars/kafka"))
    ap.add_argument("--cores", default=None, help="--cores for Kelp (default: all)")
    ap.add_argument("--storage", default="local")
    ap.add_argument("--rate", type=int, default=10000, help="records/s of each producer")
    ap.add_argument("--cache-mib", type=int, default=128)
    ap.add_argument("--request-mib", type=int, default=128)
    ap.add_argument("--fetch-max-mib", type=int, default=16)
    ap.add_argument("--idle", type=int, default=500)
    ap.add_argument("--share-rate", type=int, default=200,
                    help="records/s produced to the share group's topic")
    ap.add_argument("--share-jars", default=os.path.join(
        os.environ.get("KELP_CACHE", os.path.expanduser("~/.cache/kelp")), "jars", "clients-share"))
    ap.add_argument("--out", default=None, help="directory for samples.csv and logs")
    a = ap.parse_args()

    out = a.out or tempfile.mkdtemp(prefix="kelp-soak-")
    os.makedirs(out, exist_ok=True)
    data = tempfile.mkdtemp(prefix="kelp-soak-data-")
    port, mport = free_port(), free_port()
    args = [a.kelp, "--listen", f"127.0.0.1:{port}", "--advertised-host", "127.0.0.1",
            "--storage", a.storage, "--data-dir", data, "--metrics-addr", f"127.0.0.1:{mport}",
            "--cache-bytes-per-core", str(a.cache_mib * MIB),
            "--queued-max-request-bytes", str(a.request_mib * MIB),
            "--max-request-bytes", str(min(100, a.request_mib - 1) * MIB),
            "--fetch-max-bytes", str(a.fetch_max_mib * MIB),
            "--write-timeout-ms", "10000", "--default-partitions", "8",
            "--retention-check-ms", "5000", "--log-cleaner-backoff-ms", "2000",
            "--group-initial-rebalance-delay-ms", "500"]
    if a.cores:
        args += ["--cores", a.cores]
    log = open(os.path.join(out, "kelp.log"), "ab")
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    rc = None
    try:
        rc = run(a, proc, port, mport, out)
        return rc
    finally:
        STOP.set()
        for c in CHILDREN:
            if c.poll() is None:
                c.kill()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["rm", "-rf", data])
        log.close()
        # A passing run's own temporary logs go (each CI run left ~3 MB behind); a failed
        # run's, or a directory the caller named, stay.
        if rc == 0 and a.out is None:
            subprocess.run(["rm", "-rf", out])
        else:
            print(f"soak: logs and samples in {out}", flush=True)


def run(a, proc, port, mport, out):
    bs = f"127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        if proc.poll() is not None:
            print(f"soak: kelp exited at start ({proc.returncode})")
            return 1
        if time.time() > deadline:
            print("soak: FAIL: kelp not ready within 60 s")
            return 1
        with open(os.path.join(out, "kelp.log"), "rb") as f:
            if b"kelp ready" in f.read():
                break
        time.sleep(0.1)
    cores = len(scrape(mport).get("kelp_cache_bytes", [])) or 1
    # The memory model (README "Memory"): fixed overhead + cache budget of every core +
    # the request budget + per-connection overhead + fetch responses read from the log (each
    # fetching connection holds at most --fetch-max-bytes per core).
    # classic and KIP-848 group consumers, slow, stalled, the two read_committed readers, the
    # two share-group members (ShareFetch answers are bounded as Fetch's; a killed member's
    # connections are gone before it comes back). What share groups hold besides is not
    # material: each share-partition keeps at most 2000 in-flight offsets per group, as
    # in-flight batches of a few dozen bytes (4 partitions here: well under 1 MiB).
    fetchers = 3 + 2 + 1 + 1 + 2 + 2
    conns_budget = 2000 * 16 / 1024
    # The local log's I/O threads (4 per core by default) each keep a 2 MiB O_DIRECT staging
    # buffer once they wrote a durable round, and 2 MiB of zeros are written ahead of segments.
    staging = cores * 4 * 2 + 2 if a.storage == "local" else 0
    model = (FIXED_MIB + cores * a.cache_mib + a.request_mib + fetchers * cores * a.fetch_max_mib
             + conns_budget + staging)
    print(f"soak: kelp pid {proc.pid} on {cores} cores, {a.seconds} s, model {model:.0f} MiB "
          f"({FIXED_MIB} fixed + {cores} x {a.cache_mib} cache + {a.request_mib} requests + "
          f"{fetchers} fetchers x {cores} x {a.fetch_max_mib} + {conns_budget:.0f} conns + "
          f"{staging} staging), out {out}", flush=True)

    topic, group = "soak-all", "soak-group"
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bs})
    # Retention keeps the disk (and the in-memory indexes of what it holds) bounded over
    # hours: 2 topics x 8 partitions x 128 MiB.
    retention = {"retention.bytes": str(128 * MIB), "segment.bytes": str(32 * MIB)}
    for t in (topic, "soak-one"):
        admin.create_topics([NewTopic(t, 8, 1, config=retention)])[t].result(15)
    # Compacted and transactional, segments rolled every 2 s: the cleaner has work all along.
    compacted = {**retention, "cleanup.policy": "compact,delete", "segment.ms": "2000",
                 "min.cleanable.dirty.ratio": "0.1"}
    admin.create_topics([NewTopic("soak-txn", 8, 1, config=compacted)])["soak-txn"].result(15)
    logs = os.path.join(out, "clients")
    os.makedirs(logs, exist_ok=True)
    keep = []
    idle_connections(port, a.idle, keep)
    java_producer(bs, a.jars, topic, "all", a.rate, logs)
    java_producer(bs, a.jars, "soak-one", "1", a.rate, logs)
    for i in range(3):
        group_consumer(bs, topic, group, i)
    group_consumer(bs, topic, "soak-group-848", 3, kip848=True)
    group_consumer(bs, "^soak-(all|one)$", "soak-group-848", 4, kip848=True)
    admin_calls(bs)
    transactional_producer(bs, "soak-txn")
    committed_reader(bs, "soak-txn")
    committed_reader(bs, "soak-txn", from_start=True)
    share = ShareWorkload(bs, out, a.share_rate, a.share_jars)
    share.start(admin)
    slow_consumer(port, "soak-one")
    stalled_consumer(port, "soak-one")
    garbage(port)

    t0 = time.time()
    samples = open(os.path.join(out, "samples.csv"), "w")
    samples.write("t_s,rss_mib,cache_mib_per_core,request_mib,connections\n")
    worst = {"rss": 0.0, "cache": 0.0, "request": 0.0}
    failure = None
    while time.time() - t0 < a.seconds:
        time.sleep(5)
        if proc.poll() is not None:
            failure = f"kelp exited with {proc.returncode} after {time.time() - t0:.0f} s"
            break
        rss = rss_mib(proc.pid)
        try:
            m = scrape(mport)
        except Exception as e:  # noqa: BLE001
            failure = f"/metrics unreachable: {e!r}"
            break
        cache = [v / MIB for v in m.get("kelp_cache_bytes", [0])]
        req = sum(m.get("kelp_request_memory_bytes", [0])) / MIB
        conns = sum(m.get("kelp_connections", [0]))
        worst["rss"] = max(worst["rss"], rss)
        worst["cache"] = max(worst["cache"], max(cache))
        worst["request"] = max(worst["request"], req)
        el = time.time() - t0
        share.sample_cpu()
        samples.write(f"{el:.0f},{rss:.1f},{'/'.join(f'{c:.1f}' for c in cache)},{req:.1f},{conns:.0f}\n")
        samples.flush()
        print(f"soak: t={el:5.0f}s rss={rss:7.1f} MiB cache/core={[round(c, 1) for c in cache]} "
              f"requests={req:6.1f} MiB conns={conns:.0f}", flush=True)
        if rss > model:
            failure = f"RSS {rss:.0f} MiB above the model's {model:.0f} MiB"
            break
        if max(cache) > a.cache_mib:
            failure = f"cache {max(cache):.1f} MiB above its budget {a.cache_mib} MiB"
            break
        if req > a.request_mib:
            failure = f"request memory {req:.1f} MiB above its budget {a.request_mib} MiB"
            break
    STOP.set()
    elapsed = time.time() - t0
    for s in keep:
        s.close()
    share_counts, share_fails = share.finish() if failure is None else ({}, [])
    for what, n in share_counts.items():
        count(what, n)
    for f in share_fails:
        print(f"soak: FAIL: {f}", flush=True)
        failure = failure or f
    alive = proc.poll() is None and kwire.api_versions(bs, 0)["error_code"] == 0
    if not alive and failure is None:
        failure = "kelp stopped answering at the end"
    with COUNTS_LOCK:
        counts = dict(sorted(COUNTS.items()))
    summary = {"seconds": round(elapsed), "cores": cores, "max_rss_mib": round(worst["rss"], 1),
               "model_mib": round(model), "max_cache_mib_per_core": round(worst["cache"], 1),
               "cache_budget_mib": a.cache_mib, "max_request_mib": round(worst["request"], 1),
               "request_budget_mib": a.request_mib, "counts": counts,
               "result": "FAIL: " + failure if failure else "ok"}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("soak: summary " + json.dumps(summary), flush=True)
    # Load that never ran would make a green soak meaningless.
    if counts.get("txn_aborted_seen", 0) and failure is None:
        failure = f"a read_committed consumer saw {counts['txn_aborted_seen']} aborted records"
        print(f"soak: FAIL: {failure}")
    for need in ("produce_acksall_runs", "produce_acks1_runs", "consumed", "consumed_848",
                 "admin_rounds",
                 "txn_commits", "txn_aborts", "txn_committed_read", "txn_committed_rescanned",
                 "slow_fetches", "stalled_closed_by_broker", "garbage_conns",
                 "share_produced", "share_accepted", "share_rejected", "share_released",
                 "share_redelivered", "share_kills"):
        if elapsed > 120 and counts.get(need, 0) == 0 and failure is None:
            failure = f"no {need} during the run"
            print(f"soak: FAIL: {failure}")
    with open(os.path.join(out, "kelp.log"), "rb") as f:
        cleaned = f.read().count(b'log cleaner compacted segments topic=soak-txn')
    print(f"soak: log cleaner rounds that compacted soak-txn: {cleaned}")
    if elapsed > 120 and cleaned == 0 and failure is None:
        failure = "the log cleaner never compacted soak-txn"
        print(f"soak: FAIL: {failure}")
    # The transactional ProducerPerformance run is the second acks=all one (~130 s in).
    if elapsed > 200 and counts.get("produce_txn_runs", 0) == 0 and failure is None:
        failure = "no produce_txn_runs during the run"
        print(f"soak: FAIL: {failure}")
    if failure:
        print(f"soak: FAIL: {failure}")
        with open(os.path.join(out, "kelp.log"), "rb") as f:
            print(f.read()[-4000:].decode(errors="replace"))
        return 1
    print("soak: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
