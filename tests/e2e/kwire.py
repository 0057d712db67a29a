"""kwire: a tiny raw Kafka wire-protocol helper for end-to-end tests.

Pure Python (struct + a table-driven CRC32C). It builds request frames byte by
byte so tests can send exactly the (possibly malformed) bytes they want, and
parses just enough of the responses the tests look at.

Every socket operation has a timeout; nothing here can hang a test forever.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import time
import zlib

DEFAULT_TIMEOUT = 5.0

# ---------------------------------------------------------------------------
# Api keys and error codes used by the tests
# ---------------------------------------------------------------------------

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_REQUEST = 42
INVALID_RECORD = 87

# ---------------------------------------------------------------------------
# CRC32C (Castagnoli, reflected polynomial 0x82F63B78)
# ---------------------------------------------------------------------------


def _make_crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C of `data` (as used by Kafka RecordBatch v2)."""
    crc ^= 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC32C self-test failed"

# ---------------------------------------------------------------------------
# Primitive encoders
# ---------------------------------------------------------------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def u32(v: int) -> bytes:
    return struct.pack(">I", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def uvarint(v: int) -> bytes:
    if v < 0:
        raise ValueError("uvarint must be >= 0")
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v: int) -> bytes:
    """Zig-zag signed varint (int32 or int64 range)."""
    return uvarint((v << 1) ^ (v >> 63))


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def nbytes(b: bytes | None) -> bytes:
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def compact_bytes(b: bytes | None) -> bytes:
    if b is None:
        return uvarint(0)
    return uvarint(len(b) + 1) + b


def array(items: list[bytes] | None) -> bytes:
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(items)


def compact_array(items: list[bytes] | None) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


EMPTY_TAGS = b"\x00"  # tagged fields: zero of them

# ---------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------


class Truncated(Exception):
    pass


class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Truncated(f"need {n} bytes at {self.pos}, have {self.remaining()}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def _unpack(self, fmt: str, n: int):
        return struct.unpack(fmt, self.take(n))[0]

    def i8(self) -> int:
        return self._unpack(">b", 1)

    def i16(self) -> int:
        return self._unpack(">h", 2)

    def i32(self) -> int:
        return self._unpack(">i", 4)

    def u32(self) -> int:
        return self._unpack(">I", 4)

    def i64(self) -> int:
        return self._unpack(">q", 8)

    def boolean(self) -> bool:
        return self.i8() != 0

    def uuid(self) -> bytes:
        return self.take(16)

    def uvarint(self) -> int:
        shift = 0
        v = 0
        while True:
            b = self.take(1)[0]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def varint(self) -> int:
        z = self.uvarint()
        return (z >> 1) ^ -(z & 1)

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def array_len(self) -> int:
        return self.i32()

    def compact_array_len(self) -> int:
        """Element count of a compact array (-1 for null)."""
        return self.uvarint() - 1

    def tagged_fields(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self.take(size)
        return out


# ---------------------------------------------------------------------------
# Headers and frames
# ---------------------------------------------------------------------------


def request_header(api_key: int, api_version: int, correlation_id: int,
                   header_version: int, client_id: str | None = "kwire") -> bytes:
    """Request header v0 (key, version, corr), v1 (+ client_id), v2 (+ tags)."""
    h = i16(api_key) + i16(api_version) + i32(correlation_id)
    if header_version >= 1:
        h += string(client_id)
    if header_version >= 2:
        h += EMPTY_TAGS
    return h


def frame(body: bytes) -> bytes:
    return i32(len(body)) + body


# First flexible version of each api the tests use (request header v2 /
# response header v1 from there on; ApiVersions responses always use header v0).
FIRST_FLEXIBLE = {
    PRODUCE: 9,
    FETCH: 12,
    LIST_OFFSETS: 6,
    METADATA: 9,
    API_VERSIONS: 3,
    CREATE_TOPICS: 5,
}


def is_flexible(api_key: int, version: int) -> bool:
    return version >= FIRST_FLEXIBLE.get(api_key, 1 << 15)


def request_header_version(api_key: int, version: int) -> int:
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes,
                  header_version: int | None = None, client_id: str | None = "kwire") -> bytes:
    if header_version is None:
        header_version = request_header_version(api_key, version)
    return frame(request_header(api_key, version, correlation_id, header_version, client_id) + body)


# ---------------------------------------------------------------------------
# Connection
# ---------------------------------------------------------------------------


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


class Closed(Exception):
    """The peer closed the connection (EOF or reset)."""


class Conn:
    def __init__(self, bootstrap: str, timeout: float = DEFAULT_TIMEOUT):
        self.addr = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self.sock = socket.create_connection(self.addr, timeout=timeout)
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_corr = 1000
        self._buf = b""

    # -- raw io -------------------------------------------------------------

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def shutdown_write(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_exact(self, n: int, deadline: float) -> bytes:
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout(f"timed out waiting for {n} bytes (have {len(self._buf)})")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError as e:
                raise Closed(f"connection reset after {len(self._buf)} buffered bytes") from e
            if not chunk:
                raise Closed(f"EOF after {len(self._buf)} buffered bytes (wanted {n})")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def recv_frame(self, timeout: float | None = None) -> bytes:
        """One response frame's body (without its 4-byte length)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        (size,) = struct.unpack(">i", self._recv_exact(4, deadline))
        if size < 0 or size > 64 * 1024 * 1024:
            raise ValueError(f"absurd response frame size {size}")
        return self._recv_exact(size, deadline)

    def wait_closed(self, timeout: float | None = None) -> tuple[bool, bytes]:
        """Read until the peer closes. Returns (closed, bytes received before
        the close or the timeout). `closed` is False if the timeout hit."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        got = self._buf
        self._buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, got
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False, got
            except (ConnectionResetError, BrokenPipeError):
                return True, got
            if not chunk:
                return True, got
            got += chunk

    # -- requests -----------------------------------------------------------

    def next_corr(self) -> int:
        self._next_corr += 1
        return self._next_corr

    def send_request(self, api_key: int, version: int, body: bytes,
                     correlation_id: int | None = None, header_version: int | None = None) -> int:
        corr = self.next_corr() if correlation_id is None else correlation_id
        self.send(request_frame(api_key, version, corr, body, header_version))
        return corr

    def recv_response(self, api_key: int, version: int, expect_corr: int | None = None,
                      header_version: int | None = None) -> tuple[int, Reader]:
        """Read one response; returns (correlation_id, reader positioned at the body)."""
        r = Reader(self.recv_frame())
        corr = r.i32()
        if header_version is None:
            header_version = response_header_version(api_key, version)
        if header_version >= 1:
            r.tagged_fields()
        if expect_corr is not None and corr != expect_corr:
            raise AssertionError(f"correlation id {corr} != expected {expect_corr}")
        return corr, r

    def roundtrip(self, api_key: int, version: int, body: bytes) -> Reader:
        corr = self.send_request(api_key, version, body)
        _, r = self.recv_response(api_key, version, expect_corr=corr)
        return r


# ---------------------------------------------------------------------------
# ApiVersions (key 18)
# ---------------------------------------------------------------------------


def api_versions_body(version: int, software_name: str = "kwire",
                      software_version: str = "0.1") -> bytes:
    if version < 3:
        return b""
    return compact_string(software_name) + compact_string(software_version) + EMPTY_TAGS


def parse_api_versions(r: Reader, version: int) -> dict:
    """Parses an ApiVersions response body of `version`. Strict: the whole body
    must be consumed."""
    out = {"error_code": r.i16(), "apis": {}, "throttle_time_ms": None, "tags": {}}
    flexible = version >= 3
    n = r.compact_array_len() if flexible else r.array_len()
    for _ in range(max(n, 0)):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        if flexible:
            r.tagged_fields()
        out["apis"][key] = (lo, hi)
    if version >= 1:
        out["throttle_time_ms"] = r.i32()
    if flexible:
        out["tags"] = r.tagged_fields()
    if r.remaining():
        raise AssertionError(f"{r.remaining()} trailing bytes after ApiVersions v{version} response")
    return out


def api_versions(bootstrap: str, version: int = 0, timeout: float = DEFAULT_TIMEOUT) -> dict:
    with Conn(bootstrap, timeout) as c:
        r = c.roundtrip(API_VERSIONS, version, api_versions_body(version))
        return parse_api_versions(r, version)


# ---------------------------------------------------------------------------
# Metadata (key 3)
# ---------------------------------------------------------------------------


def metadata_body(version: int, topics: list[str] | None, allow_auto_create: bool = False) -> bytes:
    flexible = version >= 9
    if version == 0 and topics is None:
        topics = []
    if flexible:
        items = []
        for t in topics or []:
            tid = b"\x00" * 16 if version >= 10 else b""
            items.append(tid + compact_string(t) + EMPTY_TAGS)
        b = compact_array(None if topics is None else items)
    else:
        b = array(None if topics is None else [string(t) for t in topics])
    if version >= 4:
        b += boolean(allow_auto_create)
    if 8 <= version <= 10:
        b += boolean(False)  # include_cluster_authorized_operations
    if version >= 8:
        b += boolean(False)  # include_topic_authorized_operations
    if flexible:
        b += EMPTY_TAGS
    return b


def parse_metadata(r: Reader, version: int) -> dict:
    flexible = version >= 9
    s = r.compact_string if flexible else r.string
    alen = r.compact_array_len if flexible else r.array_len
    tags = r.tagged_fields if flexible else (lambda: None)
    out = {"brokers": [], "topics": {}}
    if version >= 3:
        out["throttle_time_ms"] = r.i32()
    for _ in range(max(alen(), 0)):
        node, host, port = r.i32(), s(), r.i32()
        rack = s() if version >= 1 else None
        tags()
        out["brokers"].append((node, host, port, rack))
    if version >= 2:
        out["cluster_id"] = s()
    if version >= 1:
        out["controller_id"] = r.i32()
    for _ in range(max(alen(), 0)):
        err = r.i16()
        name = s()
        if version >= 10:
            r.uuid()
        if version >= 1:
            r.boolean()
        parts = {}
        for _ in range(max(alen(), 0)):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            if version >= 7:
                r.i32()
            for _ in range(max(alen(), 0)):
                r.i32()
            for _ in range(max(alen(), 0)):
                r.i32()
            if version >= 5:
                for _ in range(max(alen(), 0)):
                    r.i32()
            tags()
            parts[idx] = {"error_code": perr, "leader": leader}
        if version >= 8:
            r.i32()
        tags()
        out["topics"][name] = {"error_code": err, "partitions": parts}
    if 8 <= version <= 10:
        r.i32()
    tags()
    return out


# ---------------------------------------------------------------------------
# CreateTopics (key 19), v4 (non-flexible)
# ---------------------------------------------------------------------------


def create_topics_body_v4(topics: list[tuple[str, int, int]], timeout_ms: int = 10000) -> bytes:
    items = [string(name) + i32(parts) + i16(rf) + array([]) + array([])
             for name, parts, rf in topics]
    return array(items) + i32(timeout_ms) + boolean(False)


def parse_create_topics_v4(r: Reader) -> dict[str, tuple[int, str | None]]:
    r.i32()  # throttle
    out = {}
    for _ in range(max(r.array_len(), 0)):
        name, err, msg = r.string(), r.i16(), r.string()
        out[name] = (err, msg)
    return out


# ---------------------------------------------------------------------------
# Produce (key 0), v3..v12 (no topic ids)
# ---------------------------------------------------------------------------


def produce_body(version: int, topic: str, partition: int, records: bytes | None,
                 acks: int = -1, timeout_ms: int = 10000) -> bytes:
    if version >= 9:
        part = i32(partition) + compact_bytes(records) + EMPTY_TAGS
        td = compact_string(topic) + compact_array([part]) + EMPTY_TAGS
        return compact_string(None) + i16(acks) + i32(timeout_ms) + compact_array([td]) + EMPTY_TAGS
    part = i32(partition) + nbytes(records)
    td = string(topic) + array([part])
    return string(None) + i16(acks) + i32(timeout_ms) + array([td])


def parse_produce(r: Reader, version: int) -> dict[tuple[str, int], dict]:
    flexible = version >= 9
    s = r.compact_string if flexible else r.string
    alen = r.compact_array_len if flexible else r.array_len
    out = {}
    for _ in range(max(alen(), 0)):
        name = s()
        for _ in range(max(alen(), 0)):
            p = {"index": r.i32(), "error_code": r.i16(), "base_offset": r.i64()}
            p["log_append_time_ms"] = r.i64()
            if version >= 5:
                p["log_start_offset"] = r.i64()
            if version >= 8:
                errs = []
                for _ in range(max(alen(), 0)):
                    errs.append((r.i32(), s()))
                    if flexible:
                        r.tagged_fields()
                p["record_errors"] = errs
                p["error_message"] = s()
            if flexible:
                r.tagged_fields()
            out[(name, p["index"])] = p
        if flexible:
            r.tagged_fields()
    r.i32()  # throttle
    if flexible:
        r.tagged_fields()
    return out


# ---------------------------------------------------------------------------
# ListOffsets (key 2), v4 (non-flexible)
# ---------------------------------------------------------------------------

LATEST = -1
EARLIEST = -2


def list_offsets_body_v4(topic: str, partition: int, timestamp: int = LATEST) -> bytes:
    part = i32(partition) + i32(-1) + i64(timestamp)
    return i32(-1) + i8(0) + array([string(topic) + array([part])])


def parse_list_offsets_v4(r: Reader) -> dict[tuple[str, int], dict]:
    r.i32()  # throttle
    out = {}
    for _ in range(max(r.array_len(), 0)):
        name = r.string()
        for _ in range(max(r.array_len(), 0)):
            idx, err, ts, off, epoch = r.i32(), r.i16(), r.i64(), r.i64(), r.i32()
            out[(name, idx)] = {"error_code": err, "timestamp": ts, "offset": off, "leader_epoch": epoch}
    return out


# ---------------------------------------------------------------------------
# Fetch (key 1), v4 (non-flexible, one partition)
# ---------------------------------------------------------------------------


def fetch_body_v4(topic: str, partition: int, offset: int, max_wait_ms: int = 100,
                  max_bytes: int = 1 << 20) -> bytes:
    part = i32(partition) + i64(offset) + i32(max_bytes)
    return (i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0)
            + array([string(topic) + array([part])]))


def parse_fetch_v4(r: Reader) -> dict[tuple[str, int], dict]:
    r.i32()  # throttle
    out = {}
    for _ in range(max(r.array_len(), 0)):
        name = r.string()
        for _ in range(max(r.array_len(), 0)):
            idx, err, hw, lso = r.i32(), r.i16(), r.i64(), r.i64()
            for _ in range(max(r.array_len(), 0)):
                r.i64(), r.i64()  # aborted transactions
            records = r.nbytes() or b""
            out[(name, idx)] = {"error_code": err, "high_watermark": hw,
                                "last_stable_offset": lso, "records": records}
    return out


# ---------------------------------------------------------------------------
# Record batches
# ---------------------------------------------------------------------------


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: list[tuple[str, bytes | None]] = ()) -> bytes:
    body = i8(0) + varint(timestamp_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        kb = hk.encode()
        body += varint(len(kb)) + kb
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + body


def record_batch(values: list[bytes], keys: list[bytes | None] | None = None,
                 base_offset: int = 0, base_timestamp: int | None = None,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 attributes: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """An uncompressed RecordBatch (magic 2) with a correct CRC32C."""
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    if keys is None:
        keys = [None] * len(values)
    records = b"".join(encode_record(i, i, k, v) for i, (k, v) in enumerate(zip(keys, values)))
    last_delta = len(values) - 1
    after_crc = (i16(attributes) + i32(last_delta) + i64(base_timestamp)
                 + i64(base_timestamp + last_delta) + i64(producer_id) + i16(producer_epoch)
                 + i32(base_sequence) + i32(len(values)) + records)
    # batchLength counts from partitionLeaderEpoch to the end.
    after_len = i32(partition_leader_epoch) + i8(2) + u32(crc32c(after_crc)) + after_crc
    return i64(base_offset) + i32(len(after_len)) + after_len


# Offsets inside a v2 batch header.
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
RECORDS_OFFSET = 61


def verify_batch_crc(batch: bytes) -> bool:
    (stored,) = struct.unpack(">I", batch[CRC_OFFSET:CRC_OFFSET + 4])
    return stored == crc32c(batch[ATTRIBUTES_OFFSET:])


def legacy_message_set_v1(value: bytes, key: bytes | None = None, offset: int = 0,
                          timestamp: int | None = None) -> bytes:
    """A one-message legacy (magic 1) message set, CRC32 (zlib) over magic..end."""
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    after_crc = i8(1) + i8(0) + i64(timestamp) + nbytes(key) + nbytes(value)
    msg = u32(zlib.crc32(after_crc) & 0xFFFFFFFF) + after_crc
    return i64(offset) + i32(len(msg)) + msg


# ---------------------------------------------------------------------------
# Process inspection (loopback brokers only): pid and RSS of the listener
# ---------------------------------------------------------------------------


def listener_pids(port: int) -> set[int]:
    """Pids owning a LISTEN socket on `port` (Linux /proc), empty if unknown."""
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, state, inode = parts[1], parts[3], parts[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(inode)
        except OSError:
            pass
    pids = set()
    if not inodes:
        return pids
    targets = {f"socket:[{i}]" for i in inodes}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                try:
                    if os.readlink(f"{fd_dir}/{fd}") in targets:
                        pids.add(int(pid))
                        break
                except OSError:
                    continue
        except OSError:
            continue
    return pids


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def is_conn_refused(e: OSError) -> bool:
    return e.errno in (errno.ECONNREFUSED, errno.ECONNRESET)
