#!/usr/bin/env python3
"""Records real client request frames as seed corpora for the fuzz targets in fuzz/.

Starts target/release/kelp advertising the port of a small recording proxy in front of it,
runs kafka-python and confluent-kafka (librdkafka) through the proxy (admin, produce,
consumer group, offsets), and writes a few frames per (api key, version) seen:

  fuzz/corpus/request_decode/seed-<api>-v<version>-<n>   whole frame, no length prefix
  fuzz/corpus/request_header/seed-<api>-v<version>-<n>   the same frames (the header leads)
  fuzz/corpus/produce_request/seed-v<version>-<n>        version pick byte + Produce body

    python3 scripts/fuzz_seeds.py [--per-key N]

Crate-checked seeds for the versions no client sent (each api's min, max and first flexible
version, every Produce version) come from the shape tests:

    KELP_SEED_DIR=fuzz/corpus cargo test --release --lib -- --ignored dump_fuzz_seeds

The committed corpus is what both wrote, minimized to the files that add coverage
(`<target binary> -merge=1 <new dir> fuzz/corpus/<target>`, keeping the seed-* names).
"""
import argparse
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KELP = os.environ.get("KELP_BIN", os.path.join(ROOT, "target", "release", "kelp"))
PRODUCE_MIN, PRODUCE_FIRST_FLEXIBLE = 3, 9
# First flexible version of every api Kelp serves (src/protocol/versions.rs): the request
# header has a tagged-field section from there on.
FIRST_FLEXIBLE = {0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4,
                  15: 5, 16: 3, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 32: 4, 42: 2, 44: 1, 47: 1,
                  60: 0}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """A TCP proxy that keeps every complete client-to-broker frame."""

    def __init__(self, listen_port, upstream_port):
        self.frames = []
        self.lock = threading.Lock()
        self.upstream = upstream_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", listen_port))
        self.sock.listen(64)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self.pump, args=(c, u, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, False), daemon=True).start()

    def pump(self, src, dst, record):
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if record:
                    buf += data
                    while len(buf) >= 4:
                        (n,) = struct.unpack(">i", buf[:4])
                        if len(buf) < 4 + n:
                            break
                        with self.lock:
                            self.frames.append(buf[4:4 + n])
                        buf = buf[4 + n:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def header_len(frame):
    key, version = struct.unpack(">hh", frame[:4])
    (cid,) = struct.unpack(">h", frame[8:10])
    n = 10 + max(cid, 0)
    if version >= FIRST_FLEXIBLE.get(key, 1 << 15):
        n += 1  # clients send no header tags: one zero count byte
    return key, version, n


def run_clients(bootstrap):
    topic = f"seed-{uuid.uuid4().hex[:6]}"
    group = f"seed-group-{uuid.uuid4().hex[:6]}"
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    def attempt(what, call):
        # Seeds are best effort: an admin call this client version lacks is skipped.
        try:
            call()
        except Exception as e:  # noqa: BLE001
            print(f"kafka-python {what}: {e!r}", file=sys.stderr)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    attempt("describe_configs", lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
    attempt("list_groups", admin.list_groups)
    attempt("describe_cluster", admin.describe_cluster)
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for i in range(20):
        p.send(topic, key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"v")])
    p.flush()
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      consumer_timeout_ms=4000)
    got = sum(1 for _ in c)
    c.commit()
    c.close()
    attempt("describe_groups", lambda: admin.describe_groups([group]))
    attempt("list_group_offsets", lambda: admin.list_group_offsets(group))
    attempt("delete_groups", lambda: admin.delete_groups([group]))
    attempt("delete_topics", lambda: admin.delete_topics([topic]))
    admin.close()
    print(f"kafka-python: consumed {got}", file=sys.stderr)

    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic as CNewTopic

    ca = AdminClient({"bootstrap.servers": bootstrap})
    t2 = topic + "-rd"
    for f in ca.create_topics([CNewTopic(t2, 1, 1)]).values():
        f.result(10)
    cp = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4"})
    for i in range(20):
        cp.produce(t2, key=b"k", value=b"x" * i)
    cp.flush(10)
    cc = Consumer({"bootstrap.servers": bootstrap, "group.id": group + "-rd", "auto.offset.reset": "earliest",
                   "enable.auto.commit": False})
    cc.subscribe([t2])
    n, deadline = 0, time.time() + 15
    while n < 20 and time.time() < deadline:
        m = cc.poll(0.5)
        if m is not None and not m.error():
            n += 1
    cc.commit(asynchronous=False)
    cc.committed([TopicPartition(t2, 0)], 5)
    cc.close()
    for f in ca.delete_topics([t2]).values():
        f.result(10)
    print(f"confluent-kafka: consumed {n}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-key", type=int, default=2, help="frames kept per (api key, version)")
    args = ap.parse_args()
    kport, pport = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="kelp-seeds-")
    log = open(os.path.join(data, "kelp.log"), "wb")
    proc = subprocess.Popen([KELP, "--listen", f"127.0.0.1:{kport}", "--advertised-port", str(pport),
                             "--data-dir", data], stdout=log, stderr=log)
    try:
        rec = Recorder(pport, kport)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", kport), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        run_clients(f"127.0.0.1:{pport}")
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)
    kept = {}
    out = {t: os.path.join(ROOT, "fuzz", "corpus", t) for t in ("request_decode", "request_header", "produce_request")}
    for d in out.values():
        os.makedirs(d, exist_ok=True)
    for f in rec.frames:
        key, version, hlen = header_len(f)
        n = kept.get((key, version), 0)
        if n >= args.per_key:
            continue
        kept[(key, version)] = n + 1
        name = f"seed-{key}-v{version}-{n}"
        for t in ("request_decode", "request_header"):
            with open(os.path.join(out[t], name), "wb") as fh:
                fh.write(f)
        if key == 0:
            with open(os.path.join(out["produce_request"], f"seed-v{version}-{n}"), "wb") as fh:
                fh.write(bytes([version - PRODUCE_MIN]) + f[hlen:])
    print("recorded", sorted(kept), file=sys.stderr)


if __name__ == "__main__":
    main()
