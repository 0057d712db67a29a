#!/usr/bin/env python3
"""Records real client request frames as seed corpora for the fuzz targets in fuzz/.

Starts target/release/kelp advertising the port of a small recording proxy in front of it,
runs kafka-python and confluent-kafka (librdkafka) through the proxy (admin, produce,
consumer group, offsets), and writes a few frames per (api key, version) seen:

  fuzz/corpus/request_decode/seed-<api>-v<version>-<n>   whole frame, no length prefix
  fuzz/corpus/request_header/seed-<api>-v<version>-<n>   the same frames (the header leads)
  fuzz/corpus/produce_request/seed-v<version>-<n>        version pick byte + Produce body

    python3 scripts/fuzz_seeds.py [--per-key N]

Share groups (KIP-932) have no client among these, so their frames are built here, well formed
at the versions Kelp advertises (flexible, with tagged fields): ShareGroupHeartbeat v1 (join,
heartbeat, leave, an unknown body tag), ShareGroupDescribe v1, ShareFetch v1 (a session opened,
acknowledgement batches of every type with gaps, forgotten topics, an acknowledgement-only
fetch, a close; MaxWaitMs at most 50), ShareAcknowledge v1 and DescribeShareGroupOffsets v0
(a null topic list too). Each frame is sent to a fresh Kelp first: one it answers is one its
decoder took (a malformed frame closes the connection); keys Kelp does not serve yet are kept
as seeds all the same, reported as such:

  fuzz/corpus/{request_decode,request_header}/seed-share-<api>-v<version>-<name>

    python3 scripts/fuzz_seeds.py --share          # only these (no client recording)

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
                  60: 0, 68: 0, 69: 0, 76: 0, 77: 0, 78: 0, 79: 0, 90: 0}


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


# --- share groups (KIP-932): hand-built frames ----------------------------------------------

def _u(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _cs(s):  # compact (nullable) string
    if s is None:
        return b"\0"
    b = s.encode()
    return _u(len(b) + 1) + b


def _ca(items):  # compact (nullable) array of encoded items
    if items is None:
        return b"\0"
    return _u(len(items) + 1) + b"".join(items)


def _tags(tags=None):
    tags = tags or {}
    return _u(len(tags)) + b"".join(_u(t) + _u(len(v)) + v for t, v in sorted(tags.items()))


def _i8(v):
    return struct.pack(">b", v)


def _i32(v):
    return struct.pack(">i", v)


def _i64(v):
    return struct.pack(">q", v)


TID1 = uuid.UUID("6b1c3f0e-2d4a-4c5e-9f10-1a2b3c4d5e6f").bytes
TID2 = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100").bytes
MEMBER = "Qm9ZaGVyZS1tZW1iZXItMQ"


def share_header(key, version, corr):
    # Request header v2: key, version, correlation id, client id (int16 string), tags.
    return struct.pack(">hhih", key, version, corr, 10) + b"seed-share" + _tags()


def ack_batch(first, last, types):
    return _i64(first) + _i64(last) + _ca([_i8(t) for t in types]) + _tags()


def share_fetch(epoch, wait, topics, forgotten, min_bytes=1, max_bytes=1 << 20, records=500,
                group="seed-share", member=MEMBER):
    # ShareFetch v1: GroupId, MemberId, ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes,
    # MaxRecords, BatchSize, Topics [TopicId, Partitions [PartitionIndex,
    # AcknowledgementBatches [FirstOffset, LastOffset, AcknowledgeTypes []int8]]],
    # ForgottenTopicsData [TopicId, Partitions []int32].
    t = [tid + _ca([_i32(p) + _ca([ack_batch(*b) for b in bs]) + _tags() for p, bs in parts]) + _tags()
         for tid, parts in topics]
    f = [tid + _ca([_i32(p) for p in parts]) + _tags() for tid, parts in forgotten]
    return (_cs(group) + _cs(member) + _i32(epoch) + _i32(wait) + _i32(min_bytes) + _i32(max_bytes)
            + _i32(records) + _i32(records) + _ca(t) + _ca(f) + _tags())


def share_ack(epoch, topics, group="seed-share", member=MEMBER):
    # ShareAcknowledge v1: GroupId, MemberId, ShareSessionEpoch, Topics [TopicId, Partitions
    # [PartitionIndex, AcknowledgementBatches]].
    t = [tid + _ca([_i32(p) + _ca([ack_batch(*b) for b in bs]) + _tags() for p, bs in parts]) + _tags()
         for tid, parts in topics]
    return _cs(group) + _cs(member) + _i32(epoch) + _ca(t) + _tags()


def share_heartbeat(epoch, topics, rack=None, member=MEMBER, tags=None):
    # ShareGroupHeartbeat v1: GroupId, MemberId, MemberEpoch, RackId, SubscribedTopicNames.
    return (_cs("seed-share") + _cs(member) + _i32(epoch) + _cs(rack)
            + _ca(None if topics is None else [_cs(t) for t in topics]) + _tags(tags))


def share_seed_frames():
    """[(name, api key, version, frame without its length prefix)]: well-formed share requests."""
    ACC, REL, REJ, GAP = 1, 2, 3, 0
    bodies = [
        ("join", 76, 1, share_heartbeat(0, ["seed-topic", "seed-other"])),
        ("heartbeat", 76, 1, share_heartbeat(3, None, rack="rack-1")),
        ("leave", 76, 1, share_heartbeat(-1, None)),
        ("tagged", 76, 1, share_heartbeat(5, ["seed-topic"], tags={7: b"abc"})),
        ("describe", 77, 1, _ca([_cs("seed-share"), _cs("seed-other")]) + b"\1" + _tags()),
        ("open", 78, 1, share_fetch(0, 50, [(TID1, [(0, []), (1, []), (2, [])]), (TID2, [(0, [])])], [])),
        ("acks", 78, 1, share_fetch(1, 20, [
            (TID1, [(0, [(0, 9, [ACC]), (10, 14, [ACC, REL, REJ, GAP, ACC])]),
                    (1, [(5, 5, [REJ]), (6, 8, [REL])])])],
            [(TID2, [0, 3])])),
        ("ack-only", 78, 1, share_fetch(2, 0, [(TID1, [(2, [(0, 499, [ACC])])])], [(TID1, [1])],
                                        min_bytes=0, max_bytes=0, records=0)),
        ("close", 78, 1, share_fetch(-1, 0, [(TID1, [(0, [(15, 20, [REL])])])], [],
                                     min_bytes=0, max_bytes=0, records=0)),
        ("ack", 79, 1, share_ack(3, [(TID1, [(0, [(20, 29, [ACC]), (30, 31, [REL, REJ])]),
                                              (1, [(9, 9, [GAP])])])])),
        ("ack-close", 79, 1, share_ack(-1, [(TID1, [(2, [(500, 510, [REJ])])]),
                                             (TID2, [(0, [(0, 0, [ACC])])])])),
        ("offsets", 90, 0, _ca([
            _cs("seed-share") + _ca([_cs("seed-topic") + _ca([_i32(0), _i32(1), _i32(2)]) + _tags()])
            + _tags(),
            _cs("seed-other") + b"\0" + _tags()]) + _tags()),
    ]
    return [(name, key, v, share_header(key, v, i + 1) + body)
            for i, (name, key, v, body) in enumerate(bodies)]


def check_share_frames(port, frames):
    """Sends each frame on its own connection; True where Kelp answered it (decoded), False
    where it closed the connection (malformed, or an api it does not serve)."""
    answered = {}
    for name, key, v, f in frames:
        ok = False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(struct.pack(">i", len(f)) + f)
                head = b""
                while len(head) < 8:
                    got = s.recv(8 - len(head))
                    if not got:
                        break
                    head += got
                ok = len(head) == 8 and struct.unpack(">i", head[4:8])[0] == struct.unpack(">i", f[4:8])[0]
        except OSError:
            pass
        answered[(name, key, v)] = ok
    return answered


def write_share_seeds(port):
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    import kwire  # the e2e suite's wire helpers
    apis = kwire.api_versions(f"127.0.0.1:{port}", 3)["apis"]
    frames = share_seed_frames()
    answered = check_share_frames(port, frames)
    served = {}
    for name, key, v, f in frames:
        served.setdefault(key, []).append(answered[(name, key, v)])
    bad = [(n, k) for n, k, v, _ in frames
           if not answered[(n, k, v)] and k in apis and apis[k][0] <= v <= apis[k][1]]
    if bad:
        # Kelp serves the api but closed the connection: the builder above is wrong.
        raise SystemExit(f"share seeds Kelp refused as malformed: {bad}")
    for t in ("request_decode", "request_header"):
        d = os.path.join(ROOT, "fuzz", "corpus", t)
        os.makedirs(d, exist_ok=True)
        for name, key, v, f in frames:
            with open(os.path.join(d, f"seed-share-{key}-v{v}-{name}"), "wb") as fh:
                fh.write(f)
    for key, oks in sorted(served.items()):
        print(f"share seeds api {key}: {len(oks)} frames, "
              f"{'answered by Kelp' if all(oks) else 'not advertised by this Kelp (kept as seeds)'}",
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-key", type=int, default=2, help="frames kept per (api key, version)")
    ap.add_argument("--share", action="store_true",
                    help="only the hand-built share-group frames (no client recording)")
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
        write_share_seeds(kport)
        if args.share:
            return
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
