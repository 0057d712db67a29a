"""Bad-input handling at the Kafka wire level, asserted exactly as Apache Kafka 4.x behaves.

Every case talks raw bytes to the broker through tests/e2e/kwire.py and ends by
checking that the broker is still alive: a fresh connection gets a valid
ApiVersions v0 answer.

Where Kafka closes the connection rather than answering, the test asserts the
close (EOF or reset, with no response bytes at all) -- see the comment of each case.
The behaviours were checked against a real Apache Kafka 4.x broker
(scripts/kafka.sh start 19092; KELP_BOOTSTRAP=127.0.0.1:19092 pytest tests/e2e/test_bad_input.py).
"""

from __future__ import annotations

import gzip
import os
import socket
import struct
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kwire  # noqa: E402
from kwire import (  # noqa: E402
    API_VERSIONS,
    CORRUPT_MESSAGE,
    CREATE_TOPICS,
    INVALID_RECORD,
    INVALID_REQUEST,
    INVALID_REQUIRED_ACKS,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
    Conn,
)

TIMEOUT = 5.0


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


@pytest.fixture
def bootstrap(request) -> str:
    """host:port of the broker under test.

    KELP_BOOTSTRAP wins (so the module can be pointed at a real Apache Kafka, e.g.
    KELP_BOOTSTRAP=127.0.0.1:19092 after scripts/kafka.sh start 19092); otherwise the
    `broker` fixture of conftest.py starts a fresh target/release/kelp for each test."""
    env = os.environ.get("KELP_BOOTSTRAP")
    if env:
        return env
    try:
        broker = request.getfixturevalue("broker")
    except pytest.FixtureLookupError:
        pytest.fail("no broker: set KELP_BOOTSTRAP=host:port or provide the conftest `broker` fixture")
    return broker if isinstance(broker, str) else broker.bootstrap


def assert_alive(bootstrap: str) -> None:
    """A fresh connection gets a well-formed ApiVersions v0 answer."""
    resp = kwire.api_versions(bootstrap, 0, TIMEOUT)
    assert resp["error_code"] == 0, resp
    assert API_VERSIONS in resp["apis"], resp


def assert_closed_silently(conn: Conn, what: str, timeout: float = TIMEOUT) -> None:
    """The broker closes the connection and sends no byte before closing."""
    closed, got = conn.wait_closed(timeout)
    assert got == b"", f"{what}: broker sent {len(got)} bytes instead of closing: {got[:64].hex()}"
    assert closed, f"{what}: connection still open after {timeout}s (expected the broker to close it)"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    with Conn(bootstrap, TIMEOUT) as c:
        r = c.roundtrip(CREATE_TOPICS, 4, kwire.create_topics_body_v4([(name, partitions, 1)]))
        res = kwire.parse_create_topics_v4(r)
    err, msg = res[name]
    assert err in (0, kwire.TOPIC_ALREADY_EXISTS), f"CreateTopics {name}: error {err} {msg}"
    # Wait (bounded) until the partition has a leader and answers ListOffsets.
    deadline = time.monotonic() + 20
    last = None
    while time.monotonic() < deadline:
        with Conn(bootstrap, TIMEOUT) as c:
            md = kwire.parse_metadata(c.roundtrip(METADATA, 4, kwire.metadata_body(4, [name])), 4)
        t = md["topics"].get(name)
        last = t
        if t and t["error_code"] == 0 and len(t["partitions"]) == partitions and all(
            p["error_code"] == 0 and p["leader"] >= 0 for p in t["partitions"].values()
        ):
            try:
                latest_offset(bootstrap, name, 0)
                return
            except AssertionError as e:
                last = e
        time.sleep(0.2)
    pytest.fail(f"topic {name} never became ready: {last}")


def latest_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    with Conn(bootstrap, TIMEOUT) as c:
        r = c.roundtrip(LIST_OFFSETS, 4, kwire.list_offsets_body_v4(topic, partition, kwire.LATEST))
        res = kwire.parse_list_offsets_v4(r)
    p = res[(topic, partition)]
    assert p["error_code"] == 0, f"ListOffsets {topic}-{partition}: {p}"
    return p["offset"]


def produce(bootstrap: str, version: int, topic: str, records: bytes | None, partition: int = 0,
            acks: int = -1) -> dict:
    with Conn(bootstrap, TIMEOUT) as c:
        r = c.roundtrip(PRODUCE, version, kwire.produce_body(version, topic, partition, records, acks))
        res = kwire.parse_produce(r, version)
    assert list(res) == [(topic, partition)], f"Produce v{version} answered for {list(res)}"
    return res[(topic, partition)]


@pytest.fixture
def topic(bootstrap) -> str:
    name = f"kelp-bad-input-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, name, 1)
    return name


# ---------------------------------------------------------------------------
# ApiVersions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_parses(bootstrap, version):
    # v0-v2: request header v1, empty body. v3+: request header v2 (tagged fields),
    # compact client_software_name/version + tagged fields; the response header stays v0.
    with Conn(bootstrap, TIMEOUT) as c:
        corr = c.send_request(API_VERSIONS, version, kwire.api_versions_body(version), correlation_id=0x5EED0000 + version)
        got_corr, r = c.recv_response(API_VERSIONS, version)
        assert got_corr == 0x5EED0000 + version
        resp = kwire.parse_api_versions(r, version)  # strict: no trailing bytes
    assert resp["error_code"] == 0, resp
    apis = resp["apis"]
    for key in (kwire.PRODUCE, kwire.FETCH, METADATA, API_VERSIONS):
        assert key in apis, f"api {key} missing from ApiVersions v{version}: {sorted(apis)}"
    for key, (lo, hi) in apis.items():
        assert 0 <= lo <= hi, f"api {key}: bad range {lo}..{hi}"
    # Ranges a Kafka 4 client relies on (KIP-896 minimums, flexible versions present).
    assert apis[kwire.PRODUCE][0] <= 3 and apis[kwire.PRODUCE][1] >= 9, apis[kwire.PRODUCE]
    assert apis[kwire.FETCH][0] <= 4 and apis[kwire.FETCH][1] >= 12, apis[kwire.FETCH]
    assert apis[METADATA][0] == 0 and apis[METADATA][1] >= 9, apis[METADATA]
    assert apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] >= 3, apis[API_VERSIONS]
    if version >= 1:
        assert resp["throttle_time_ms"] == 0
    # The list must not depend on the request version.
    assert apis == kwire.api_versions(bootstrap, 0, TIMEOUT)["apis"]
    assert_alive(bootstrap)


def test_api_versions_unsupported_version_kip511(bootstrap):
    # Kafka (KIP-511): an ApiVersions request of a version it does not know is answered,
    # not closed: a v0-format response (response header v0) with error_code 35 and an api
    # list holding the ApiVersions range so the client can retry with a version it supports.
    # The request header of v99 is v2 (ApiVersions is flexible from v3 on).
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(API_VERSIONS, 99, kwire.api_versions_body(3), correlation_id=0x7A5B3C2D)
        corr, r = c.recv_response(API_VERSIONS, 0)
        assert corr == 0x7A5B3C2D
        resp = kwire.parse_api_versions(r, 0)  # strict v0 layout: error_code + array, nothing else
        assert resp["error_code"] == UNSUPPORTED_VERSION, resp
        # Kafka 4.0 lists exactly one entry, ApiVersions itself, with its supported range
        # (observed: {18: (0, 4)}), and nothing after the array (no throttle_time_ms).
        advertised = kwire.api_versions(bootstrap, 0, TIMEOUT)["apis"][API_VERSIONS]
        assert resp["apis"] == {API_VERSIONS: advertised}, resp
        lo, hi = advertised
        assert lo == 0 and hi >= 3, resp
        # Kafka keeps the connection: the client retries on it with a supported version.
        c.send_request(API_VERSIONS, hi, kwire.api_versions_body(hi), correlation_id=77)
        corr, r = c.recv_response(API_VERSIONS, hi)
        assert corr == 77
        retry = kwire.parse_api_versions(r, hi)
        assert retry["error_code"] == 0 and API_VERSIONS in retry["apis"]
    assert_alive(bootstrap)


def test_api_versions_v3_invalid_client_software_name(bootstrap):
    # Kafka validates client_software_name/version against [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    # and answers INVALID_REQUEST (42), keeping the connection open.
    with Conn(bootstrap, TIMEOUT) as c:
        r = c.roundtrip(API_VERSIONS, 3, kwire.api_versions_body(3, "bad name!", "1.0"))
        resp = kwire.parse_api_versions(r, 3)
        assert resp["error_code"] == INVALID_REQUEST, resp
        r = c.roundtrip(API_VERSIONS, 3, kwire.api_versions_body(3))
        assert kwire.parse_api_versions(r, 3)["error_code"] == 0
    assert_alive(bootstrap)


# ---------------------------------------------------------------------------
# Unsupported versions and unknown api keys
# ---------------------------------------------------------------------------


def test_known_api_unsupported_version_closes(bootstrap):
    # Kafka: "Received request api key METADATA with version 99 which is not enabled" ->
    # InvalidRequestException -> the connection is closed, no response is sent.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(METADATA, 99, kwire.metadata_body(12, None), header_version=2)
        assert_closed_silently(c, "Metadata v99")
    assert_alive(bootstrap)


def test_produce_below_min_version_closes(bootstrap):
    # Kafka 4 removed Produce v0-v2 (KIP-896): such a request is not enabled -> close.
    # (Kafka 4.0 still advertises Produce min 0 in ApiVersions, for old librdkafka, KAFKA-18659,
    # yet closes the connection on a v2 request: "unsupported version 2".)
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(PRODUCE, 2, kwire.produce_body(3, "x", 0, None)[2:], header_version=1)
        assert_closed_silently(c, "Produce v2")
    assert_alive(bootstrap)


@pytest.mark.parametrize("api_key", [9999, -1, 32767])
def test_unknown_api_key_closes(bootstrap, api_key):
    # Kafka: RequestHeader parsing fails for an unknown api key -> the connection is closed.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(kwire.frame(kwire.request_header(api_key, 0, 42, 1) + b"\x00" * 8))
        assert_closed_silently(c, f"api key {api_key}")
    assert_alive(bootstrap)


@pytest.mark.parametrize(
    "api_key,version,body",
    [
        (API_VERSIONS, 3, b""),  # v3 body missing (compact strings + tags)
        (METADATA, 4, kwire.i32(1_000_000)),  # array count far beyond the frame
        (METADATA, 9, kwire.uvarint(1_000_000)),  # compact array count far beyond the frame
        (PRODUCE, 9, kwire.compact_string(None) + kwire.i16(-1) + kwire.i32(1000) + kwire.uvarint(2)
         + kwire.compact_string("t") + kwire.uvarint(2) + kwire.i32(0) + kwire.uvarint(5000) + b"abc"),
        (PRODUCE, 3, kwire.string(None) + kwire.i16(1) + kwire.i32(1000) + kwire.i32(-5)),
    ],
    ids=["apiversions-v3-no-body", "metadata-v4-array-overrun", "metadata-v9-compact-overrun",
         "produce-v9-records-overrun", "produce-v3-negative-topic-count"],
)
def test_malformed_body_closes(bootstrap, api_key, version, body):
    # Kafka: a known api/version whose body cannot be parsed (field past the end of the frame,
    # a negative count for a non-nullable array) -> InvalidRequestException -> close, no answer.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(api_key, version, body)
        assert_closed_silently(c, f"malformed api {api_key} v{version} body")
    assert_alive(bootstrap)


# Issue 13 ("any client can kill it with 21 bytes"): array counts far beyond the frame, in every
# request decoded by the generic codec. The codec sizes a Vec by the count before reading the
# elements, so each of these used to abort the broker ("memory allocation of N bytes failed").
# Kafka refuses such a body (count above the bytes left) and closes the connection; so must Kelp,
# and stay up. Each body is the request's fields up to the oversized count, nothing after it.
HUGE = 0x7FFFFFFF
OFFSET_FETCH, JOIN_GROUP, SYNC_GROUP, DESCRIBE_CONFIGS = 9, 11, 14, 32
NO_TAGS = kwire.uvarint(0)
OVERSIZED_COUNTS = [
    # (id, api key, version, request header version, body)
    ("metadata-v12-topics", METADATA, 12, 2, kwire.uvarint(HUGE + 1)),
    ("create-topics-v4-topics", CREATE_TOPICS, 4, 1, kwire.i32(HUGE)),
    ("create-topics-v4-assignments", CREATE_TOPICS, 4, 1,
     kwire.i32(1) + kwire.string("t") + kwire.i32(-1) + kwire.i16(-1) + kwire.i32(HUGE)),
    ("offset-fetch-v1-topics", OFFSET_FETCH, 1, 1, kwire.string("g") + kwire.i32(HUGE)),
    ("offset-fetch-v1-partitions", OFFSET_FETCH, 1, 1,
     kwire.string("g") + kwire.i32(1) + kwire.string("t") + kwire.i32(HUGE)),
    ("list-offsets-v1-topics", LIST_OFFSETS, 1, 1, kwire.i32(-1) + kwire.i32(HUGE)),
    ("list-offsets-v7-partitions", LIST_OFFSETS, 7, 2,
     kwire.i32(-1) + kwire.i8(0) + kwire.uvarint(2) + kwire.compact_string("t") + kwire.uvarint(HUGE)),
    ("fetch-v4-topics", kwire.FETCH, 4, 1,
     kwire.i32(-1) + kwire.i32(500) + kwire.i32(1) + kwire.i32(1 << 20) + kwire.i8(0) + kwire.i32(HUGE)),
    ("fetch-v12-partitions", kwire.FETCH, 12, 2,
     kwire.i32(-1) + kwire.i32(500) + kwire.i32(1) + kwire.i32(1 << 20) + kwire.i8(0) + kwire.i32(0)
     + kwire.i32(-1) + kwire.uvarint(2) + kwire.compact_string("t") + kwire.uvarint(HUGE)),
    ("join-group-v5-protocols", JOIN_GROUP, 5, 1,
     kwire.string("g") + kwire.i32(10000) + kwire.i32(10000) + kwire.string("") + kwire.string(None)
     + kwire.string("consumer") + kwire.i32(HUGE)),
    ("join-group-v6-protocols", JOIN_GROUP, 6, 2,
     kwire.compact_string("g") + kwire.i32(10000) + kwire.i32(10000) + kwire.compact_string("")
     + kwire.compact_string(None) + kwire.compact_string("consumer") + kwire.uvarint(HUGE)),
    ("sync-group-v3-assignments", SYNC_GROUP, 3, 1,
     kwire.string("g") + kwire.i32(1) + kwire.string("m") + kwire.string(None) + kwire.i32(HUGE)),
    ("describe-configs-v1-resources", DESCRIBE_CONFIGS, 1, 1, kwire.i32(HUGE)),
    ("describe-configs-v1-keys", DESCRIBE_CONFIGS, 1, 1,
     kwire.i32(1) + kwire.i8(2) + kwire.string("t") + kwire.i32(HUGE)),
]


def assert_metadata_answers(bootstrap: str) -> None:
    """A fresh connection gets a Metadata v12 answer listing the brokers."""
    with Conn(bootstrap, TIMEOUT) as c:
        corr = c.send_request(METADATA, 12, kwire.compact_array([]) + kwire.boolean(False)
                              + kwire.boolean(False) + NO_TAGS, header_version=2)
        got, r = c.recv_response(METADATA, 12, expect_corr=corr, header_version=1)
        assert got == corr
        md = kwire.parse_metadata(r, 12)
    assert md["brokers"], md


def kelp_log_since(request, since: int | None) -> str | None:
    """What the Kelp broker started by conftest logged since `since` (None: external broker)."""
    if since is None:
        return None
    return request.getfixturevalue("broker").log_tail(since)


def log_mark(request) -> int | None:
    if os.environ.get("KELP_BOOTSTRAP"):
        return None
    return request.getfixturevalue("broker").log_size()


def test_issue_13_metadata_v1_21_bytes(bootstrap, request):
    # The exact frame of the issue: Metadata v1, client id "rel", topic count 0x7fffffff.
    since = log_mark(request)
    frame = bytes.fromhex("000000110003000100000001000372656c7fffffff")
    assert len(frame) == 21
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(frame)
        assert_closed_silently(c, "issue 13 frame")
    assert_alive(bootstrap)
    assert_metadata_answers(bootstrap)
    log = kelp_log_since(request, since)
    if log is not None:
        assert "malformed request: MetadataRequest v1" in log and "Topics" in log, log[-2000:]


@pytest.mark.parametrize("api_key,version,header_version,body",
                         [c[1:] for c in OVERSIZED_COUNTS], ids=[c[0] for c in OVERSIZED_COUNTS])
def test_oversized_array_count_closes(bootstrap, request, api_key, version, header_version, body):
    since = log_mark(request)
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(api_key, version, body, header_version=header_version)
        assert_closed_silently(c, f"api {api_key} v{version} with a count of {HUGE}")
    assert_alive(bootstrap)
    assert_metadata_answers(bootstrap)
    log = kelp_log_since(request, since)
    if log is not None:
        assert "closing connection" in log and "array count past the end" in log, log[-2000:]


def test_join_group_subscription_with_oversized_count(bootstrap):
    # A well-formed JoinGroup whose consumer-protocol subscription (opaque bytes to Kafka) holds
    # a topic count of 0x7fffffff. Kelp reads the subscription to learn the topics; it must
    # not allocate by that count. Kafka treats the metadata as opaque: the join goes on.
    subscription = kwire.i16(1) + kwire.i32(HUGE)
    body = (kwire.string("kelp-bad-sub") + kwire.i32(10000) + kwire.i32(10000) + kwire.string("")
            + kwire.string(None) + kwire.string("consumer") + kwire.i32(1) + kwire.string("range")
            + kwire.nbytes(subscription))
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(JOIN_GROUP, 5, body, header_version=1)
        # The answer (MEMBER_ID_REQUIRED, or the join after the rebalance delay) may take a
        # while; what matters is that the broker survives reading the subscription.
        c.wait_closed(1.0)
    assert_alive(bootstrap)
    assert_metadata_answers(bootstrap)


@pytest.mark.parametrize("version", [0, 3])
def test_trailing_bytes_after_body_ignored(bootstrap, version):
    # Kafka parses the body it knows and ignores bytes after it: a normal answer, connection kept.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send_request(API_VERSIONS, version, kwire.api_versions_body(version) + b"trailing-garbage",
                       correlation_id=31337)
        corr, r = c.recv_response(API_VERSIONS, version)
        assert corr == 31337
        assert kwire.parse_api_versions(r, version)["error_code"] == 0
        c.send_request(METADATA, 1, kwire.metadata_body(1, []) + b"zz", correlation_id=31338)
        corr, r = c.recv_response(METADATA, 1)
        assert corr == 31338
        md = kwire.parse_metadata(r, 1)
        assert md["brokers"] and md["topics"] == {} and r.remaining() == 0, md
    assert_alive(bootstrap)


# ---------------------------------------------------------------------------
# Framing
# ---------------------------------------------------------------------------


def test_truncated_frame_then_eof_closes(bootstrap):
    # Length prefix says 100, 10 bytes follow, then the client's write side closes.
    # Kafka sees EOF mid-frame and closes the connection without answering.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(kwire.i32(100) + kwire.request_header(API_VERSIONS, 0, 1, 1)[:10])
        c.shutdown_write()
        assert_closed_silently(c, "truncated frame + SHUT_WR")
    assert_alive(bootstrap)


def test_truncated_frame_kept_open_does_not_block(bootstrap):
    # Length prefix says 100, 10 bytes follow, the socket stays open. Kafka waits for the rest
    # of the frame (until connections.max.idle.ms, 10 min by default): no answer, no close,
    # and other connections are served meanwhile.
    with Conn(bootstrap, TIMEOUT) as stuck:
        stuck.send(kwire.i32(100) + kwire.request_header(API_VERSIONS, 0, 1, 1)[:10])
        closed, got = stuck.wait_closed(1.0)
        assert got == b"", f"broker answered a partial frame: {got.hex()}"
        assert not closed, "broker closed a connection whose frame is still arriving"
        for _ in range(3):
            assert_alive(bootstrap)
        closed, got = stuck.wait_closed(0.5)
        assert (closed, got) == (False, b"")
    assert_alive(bootstrap)


def test_frame_split_across_many_writes(bootstrap):
    # A valid request delivered in tiny pieces (length prefix split too) is answered normally.
    req = kwire.request_frame(API_VERSIONS, 3, 4242, kwire.api_versions_body(3))
    with Conn(bootstrap, TIMEOUT) as c:
        for i in range(0, len(req), 3):
            c.send(req[i:i + 3])
            time.sleep(0.01)
        corr, r = c.recv_response(API_VERSIONS, 3)
        assert corr == 4242
        assert kwire.parse_api_versions(r, 3)["error_code"] == 0
    assert_alive(bootstrap)


def _listener_rss(bootstrap: str) -> dict[int, int]:
    host, port = kwire.parse_bootstrap(bootstrap)
    if host not in ("127.0.0.1", "localhost", "::1"):
        return {}
    out = {}
    for pid in kwire.listener_pids(port):
        rss = kwire.rss_kib(pid)
        if rss is not None:
            out[pid] = rss
    return out


@pytest.mark.parametrize("length", [0x7FFFFFFF, -1, -0x80000000, 200 * 1024 * 1024])
def test_absurd_length_closes_without_blowup(bootstrap, length):
    # Kafka: a negative size or one above socket.request.max.bytes (100 MiB by default) is an
    # InvalidReceiveException -> the connection is closed at once, before any body is read,
    # and nothing of that size is allocated.
    before = _listener_rss(bootstrap)
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(struct.pack(">i", length))
        try:
            c.send(b"\xab" * 65536)  # some body bytes; the broker must not wait for 2 GiB
        except (BrokenPipeError, ConnectionResetError):
            pass  # already closed: fine
        assert_closed_silently(c, f"length prefix {length}")
    assert_alive(bootstrap)
    after = _listener_rss(bootstrap)
    for pid, rss in after.items():
        if pid in before:
            grew = rss - before[pid]
            assert grew < 256 * 1024, f"broker pid {pid} RSS grew by {grew} KiB after length {length}"


def test_zero_length_frame_closes(bootstrap):
    # Kafka: a 0-byte frame is a request without a header -> parse error -> close.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(kwire.i32(0))
        assert_closed_silently(c, "zero-length frame")
    assert_alive(bootstrap)


def test_connect_and_close_without_sending(bootstrap):
    for _ in range(20):
        s = socket.create_connection(kwire.parse_bootstrap(bootstrap), timeout=TIMEOUT)
        s.close()
    # And a connection whose client half-closes at once: the broker closes its side too.
    with Conn(bootstrap, TIMEOUT) as c:
        c.shutdown_write()
        assert_closed_silently(c, "immediate SHUT_WR")
    # Abortive close (RST) right after connecting.
    s = socket.create_connection(kwire.parse_bootstrap(bootstrap), timeout=TIMEOUT)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    assert_alive(bootstrap)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00",                                 # 1 byte: not even an api key
        b"\x00\x12\x00",                         # key + half a version
        b"\x00\x12\x00\x00\x00\x00\x01",         # key + version + 3 bytes of correlation id
        b"\x00\x12\x00\x00\x00\x00\x00\x01\x00",  # + half a client_id length (header v1)
        b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\xc8abc",  # client_id length 200, 3 bytes present
        b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01k",    # v3 header v2 without tagged-fields byte
    ],
    ids=["1B", "3B", "7B", "9B", "client_id-overrun", "v2-header-no-tags"],
)
def test_short_header_closes(bootstrap, body):
    # Kafka: the frame is complete but the request header cannot be parsed -> close, no answer.
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(kwire.frame(body))
        assert_closed_silently(c, f"short header {body.hex()}")
    assert_alive(bootstrap)


# ---------------------------------------------------------------------------
# Produce with good and bad record batches
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 9])
def test_produce_valid_batch(bootstrap, topic, version):
    before = latest_offset(bootstrap, topic)
    batch = kwire.record_batch([b"good-1", b"good-2", b"good-3"], keys=[b"k1", None, b"k3"])
    p = produce(bootstrap, version, topic, batch)
    assert p["error_code"] == 0, p
    assert p["base_offset"] == before, p  # first offset of the batch = previous end offset
    assert latest_offset(bootstrap, topic) == before + 3
    assert_alive(bootstrap)


@pytest.mark.parametrize("version", [3, 9])
def test_produce_corrupt_crc(bootstrap, topic, version):
    # Kafka: CRC32C mismatch -> CorruptRecordException -> partition error CORRUPT_MESSAGE (2),
    # nothing appended, connection kept.
    before = latest_offset(bootstrap, topic)
    batch = bytearray(kwire.record_batch([b"payload-that-gets-corrupted"]))
    batch[-3] ^= 0x20  # a byte of the record value
    assert not kwire.verify_batch_crc(bytes(batch))
    p = produce(bootstrap, version, topic, bytes(batch))
    assert p["error_code"] == CORRUPT_MESSAGE, p
    assert p["base_offset"] == -1, p
    assert latest_offset(bootstrap, topic) == before
    # A good batch right after still lands at the old end offset.
    good = produce(bootstrap, version, topic, kwire.record_batch([b"after-corrupt"]))
    assert good["error_code"] == 0 and good["base_offset"] == before, good
    assert_alive(bootstrap)


def test_produce_corrupt_crc_field(bootstrap, topic):
    # The stored CRC itself is wrong (records intact): same CORRUPT_MESSAGE.
    before = latest_offset(bootstrap, topic)
    batch = bytearray(kwire.record_batch([b"x"]))
    batch[kwire.CRC_OFFSET] ^= 0xFF
    p = produce(bootstrap, 9, topic, bytes(batch))
    assert p["error_code"] == CORRUPT_MESSAGE, p
    assert latest_offset(bootstrap, topic) == before
    assert_alive(bootstrap)


@pytest.mark.parametrize("version", [3, 9])
def test_produce_magic_1_rejected(bootstrap, topic, version):
    # Kafka: Produce v3+ must carry magic 2 batches -> InvalidRecordException -> INVALID_RECORD (87).
    before = latest_offset(bootstrap, topic)
    p = produce(bootstrap, version, topic, kwire.legacy_message_set_v1(b"old-format"))
    assert p["error_code"] == INVALID_RECORD, p
    assert latest_offset(bootstrap, topic) == before
    assert_alive(bootstrap)


@pytest.mark.parametrize("version", [3, 9])
def test_produce_batch_length_beyond_data(bootstrap, topic, version):
    # batchLength claims 100 bytes more than the records field holds. Kafka's batch iterator
    # finds no complete batch -> "must have at least one record batch" -> INVALID_RECORD (87).
    before = latest_offset(bootstrap, topic)
    batch = bytearray(kwire.record_batch([b"short"]))
    (blen,) = struct.unpack_from(">i", batch, kwire.BATCH_LENGTH_OFFSET)
    struct.pack_into(">i", batch, kwire.BATCH_LENGTH_OFFSET, blen + 100)
    p = produce(bootstrap, version, topic, bytes(batch))
    assert p["error_code"] == INVALID_RECORD, p
    assert latest_offset(bootstrap, topic) == before
    assert_alive(bootstrap)


@pytest.mark.parametrize("version", [3, 9])
def test_clients_cannot_write_control_batches(bootstrap, topic, version):
    # A commit or abort marker (attributes: transactional | control) from a client. Kafka's
    # LogValidator: "Clients are not allowed to write control records" -> INVALID_RECORD.
    before = latest_offset(bootstrap, topic)
    marker = kwire.record_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x01"],
                                producer_id=5, producer_epoch=0, attributes=0x30)
    p = produce(bootstrap, version, topic, marker)
    assert p["error_code"] == INVALID_RECORD, p
    assert latest_offset(bootstrap, topic) == before
    assert_alive(bootstrap)


def test_transactional_batch_without_transactional_id(bootstrap, topic):
    # Kafka: transactional records need the request's transactional id and WRITE on it ->
    # TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); nothing is appended.
    before = latest_offset(bootstrap, topic)
    batch = kwire.record_batch([b"in-a-transaction"], producer_id=5, producer_epoch=0,
                               base_sequence=0, attributes=0x10)
    p = produce(bootstrap, 9, topic, batch)
    assert p["error_code"] == 53, p
    assert latest_offset(bootstrap, topic) == before
    assert_alive(bootstrap)


def test_produce_invalid_acks(bootstrap, topic):
    # Kafka: acks other than -1, 0, 1 -> INVALID_REQUIRED_ACKS (21) for every partition.
    before = latest_offset(bootstrap, topic)
    p = produce(bootstrap, 9, topic, kwire.record_batch([b"acks-2"]), acks=2)
    assert p["error_code"] == INVALID_REQUIRED_ACKS, p
    assert latest_offset(bootstrap, topic) == before
    assert_alive(bootstrap)


def test_produce_unknown_partition(bootstrap, topic):
    # Kafka: a partition index the topic does not have -> UNKNOWN_TOPIC_OR_PARTITION (3).
    p = produce(bootstrap, 9, topic, kwire.record_batch([b"nowhere"]), partition=99)
    assert p["error_code"] == UNKNOWN_TOPIC_OR_PARTITION, p
    assert_alive(bootstrap)


def batch_claiming(record_count: int | None = None, header_count: int | None = None) -> bytes:
    """A one-record batch whose header claims `record_count` records, or whose record claims
    `header_count` headers (none present), with lengths and CRC made consistent again."""
    batch = bytearray(kwire.record_batch([b"a"]))
    if record_count is not None:
        struct.pack_into(">i", batch, 57, record_count)
    if header_count is not None:
        assert batch[-1] == 0  # the record's header count
        count = kwire.varint(header_count)
        grow = len(count) - 1
        batch[-1:] = count
        (blen,) = struct.unpack_from(">i", batch, kwire.BATCH_LENGTH_OFFSET)
        struct.pack_into(">i", batch, kwire.BATCH_LENGTH_OFFSET, blen + grow)
        assert batch[61] < 0x80  # the record's size: a one-byte zigzag varint
        batch[61] += 2 * grow
    struct.pack_into(">I", batch, kwire.CRC_OFFSET, kwire.crc32c(bytes(batch[21:])))
    assert kwire.verify_batch_crc(bytes(batch))
    return bytes(batch)


@pytest.mark.parametrize("claim", [{"record_count": 0x7FFFFFFF}, {"header_count": 0x7FFFFFFF}],
                         ids=["record-count", "header-count"])
def test_batch_claiming_huge_counts_then_list_offsets_by_time(bootstrap, topic, claim):
    # The batch's CRC is right (the client computes it), yet its record count or a record's
    # header count is 0x7fffffff. ListOffsets by timestamp decodes stored records to find the
    # offset; the record decoder of the codec crate reserves by those counts. Kafka rejects the
    # batch on produce (INVALID_RECORD); Kelp may store it (it checks framing and CRC, not the
    # records), but reading it must not take the broker down.
    p = produce(bootstrap, 9, topic, batch_claiming(**claim))
    assert p["error_code"] in (0, INVALID_RECORD, CORRUPT_MESSAGE), p
    with Conn(bootstrap, TIMEOUT) as c:
        r = c.roundtrip(LIST_OFFSETS, 4, kwire.list_offsets_body_v4(topic, 0, 0))
        lo = kwire.parse_list_offsets_v4(r)[(topic, 0)]
    assert lo["error_code"] == 0, lo
    assert_alive(bootstrap)


# ---------------------------------------------------------------------------
# Pipelining
# ---------------------------------------------------------------------------


def test_pipelined_requests_answered_in_order(bootstrap):
    # 3 ApiVersions (v0, v3, v1) + 1 Metadata (v4, no topics) in a single write: 4 responses
    # in request order, each with its own correlation id.
    reqs = [
        (API_VERSIONS, 0, 0x01010101, kwire.api_versions_body(0)),
        (API_VERSIONS, 3, 0x02020202, kwire.api_versions_body(3)),
        (API_VERSIONS, 1, 0x03030303, kwire.api_versions_body(1)),
        (METADATA, 4, 0x04040404, kwire.metadata_body(4, [])),
    ]
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(b"".join(kwire.request_frame(k, v, corr, body) for k, v, corr, body in reqs))
        for key, ver, corr, _ in reqs:
            got, r = c.recv_response(key, ver)
            assert got == corr, f"response order: got correlation id {got:#x}, expected {corr:#x}"
            if key == API_VERSIONS:
                assert kwire.parse_api_versions(r, ver)["error_code"] == 0
            else:
                md = kwire.parse_metadata(r, ver)
                assert md["brokers"], md
                assert md["topics"] == {}, md
                assert r.remaining() == 0
    assert_alive(bootstrap)


def test_pipelined_produces_keep_order_and_share_the_wait(bootstrap, topic):
    # 300 Produce requests (acks=-1, one acks=0 among them) and a ListOffsets in a single
    # write, more than a connection runs at once (256). Kelp starts a produce's successor
    # once its appends are queued, so they wait for the disk together; answers still come
    # in request order, with offsets in that order, and the acks=0 request gets none.
    before = latest_offset(bootstrap, topic)
    acks = [-1, -1, 0] + [-1] * 297
    reqs = []
    for i, a in enumerate(acks):
        batch = kwire.record_batch([f"pipelined-{i}-{j}".encode() for j in range(3)])
        reqs.append((PRODUCE, 9, 0x100 + i, kwire.produce_body(9, topic, 0, batch, a), a))
    reqs.append((LIST_OFFSETS, 4, 0x200, kwire.list_offsets_body_v4(topic, 0, kwire.LATEST), None))
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(b"".join(kwire.request_frame(k, v, corr, body) for k, v, corr, body, _ in reqs))
        for i, (key, ver, corr, _, a) in enumerate(reqs):
            if a == 0:
                continue
            got, r = c.recv_response(key, ver)
            assert got == corr, f"response order: got correlation id {got:#x}, expected {corr:#x}"
            if key == PRODUCE:
                p = kwire.parse_produce(r, ver)[(topic, 0)]
                assert p["error_code"] == 0, p
                assert p["base_offset"] == before + 3 * i, (i, p)
            else:
                lo = kwire.parse_list_offsets_v4(r)[(topic, 0)]
                assert lo["error_code"] == 0 and lo["offset"] >= before + 3 * len(acks), lo
    assert latest_offset(bootstrap, topic) == before + 3 * len(acks)
    assert_alive(bootstrap)


def test_malformed_request_behind_pipelined_produces(bootstrap, topic):
    # Three good produces, a Produce whose body is garbage, and one more good produce, in one
    # write. Kafka handles a connection's requests one at a time: the first three are
    # answered, the garbage closes the connection, and the last is never appended.
    before = latest_offset(bootstrap, topic)
    frames = []
    for i in range(3):
        batch = kwire.record_batch([f"before-bad-{i}".encode()])
        frames.append(kwire.request_frame(PRODUCE, 9, 0x300 + i, kwire.produce_body(9, topic, 0, batch)))
    frames.append(kwire.request_frame(PRODUCE, 9, 0x3ff, b"\xff" * 7))
    after = kwire.record_batch([b"after-bad"])
    frames.append(kwire.request_frame(PRODUCE, 9, 0x400, kwire.produce_body(9, topic, 0, after)))
    with Conn(bootstrap, TIMEOUT) as c:
        c.send(b"".join(frames))
        for i in range(3):
            got, r = c.recv_response(PRODUCE, 9)
            assert got == 0x300 + i, f"got correlation id {got:#x}"
            p = kwire.parse_produce(r, 9)[(topic, 0)]
            assert p["error_code"] == 0 and p["base_offset"] == before + i, p
        assert_closed_silently(c, "garbage Produce body behind pipelined produces")
    assert latest_offset(bootstrap, topic) == before + 3
    assert_alive(bootstrap)


# ---------------------------------------------------------------------------
# Record batches whose header lies about their records (issue 13, item 3)
# ---------------------------------------------------------------------------

I32_MAX = 0x7FFFFFFF


def lying_batch(count: int, last_delta: int, base_timestamp: int, codec: int = 0,
                base_offset: int = 0) -> bytes:
    """One record ("liar") under a header claiming `count` records and `last_delta`, with a
    valid CRC32C, so only a check of the header against the records can catch it. codec 1
    gzips the records region, as a Kafka producer with compression.type=gzip does."""
    records = kwire.encode_record(0, 0, None, b"liar")
    if codec == 1:
        records = gzip.compress(records)
    after_crc = (kwire.i16(codec) + kwire.i32(last_delta) + kwire.i64(base_timestamp)
                 + kwire.i64(base_timestamp) + kwire.i64(-1) + kwire.i16(-1) + kwire.i32(-1)
                 + kwire.i32(count) + records)
    after_len = kwire.i32(-1) + kwire.i8(2) + kwire.u32(kwire.crc32c(after_crc)) + after_crc
    return kwire.i64(base_offset) + kwire.i32(len(after_len)) + after_len


def offset_for_time(bootstrap: str, topic: str, ts: int, partition: int = 0) -> dict:
    with Conn(bootstrap, TIMEOUT) as c:
        r = c.roundtrip(LIST_OFFSETS, 4, kwire.list_offsets_body_v4(topic, partition, ts))
        return kwire.parse_list_offsets_v4(r)[(topic, partition)]


def produce_known_records(bootstrap: str, topic: str) -> int:
    """Three good records at timestamps T, T+1, T+2; returns T."""
    t0 = int(time.time() * 1000) - 60_000
    p = produce(bootstrap, 9, topic, kwire.record_batch([b"a", b"b", b"c"], base_timestamp=t0))
    assert p["error_code"] == 0, p
    return t0


@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize(
    "count,last_delta,codec",
    [
        (I32_MAX, I32_MAX - 1, 0),  # consistent header, 1 record present: "premature EOF"
        (I32_MAX, 0, 0),            # count disagrees with the offset range
        (I32_MAX, I32_MAX - 1, 1),  # the same lie inside a gzip batch
        (2, 1, 0),                  # a small lie: 2 counted, 1 present
        (0, -1, 0),                 # zero records
        (-1, 0, 0),                 # a negative count
    ],
    ids=["claims-2^31-1", "count-vs-offsets", "gzip-claims-2^31-1", "claims-2", "zero", "negative"],
)
def test_produce_record_count_lie(bootstrap, topic, version, count, last_delta, codec):
    # Kafka 4 (LogValidator.validateBatch, then the record iterator): a count that disagrees
    # with lastOffsetDelta + 1, a count <= 0, or fewer records than counted are all
    # InvalidRecordException -> INVALID_RECORD (87); nothing is appended. ListOffsets by
    # timestamp keeps working on the partition (Kelp used to abort on such a batch).
    t0 = produce_known_records(bootstrap, topic)
    before = latest_offset(bootstrap, topic)
    p = produce(bootstrap, version, topic, lying_batch(count, last_delta, t0 + 10, codec))
    assert p["error_code"] == INVALID_RECORD, p
    assert p["base_offset"] == -1, p
    assert latest_offset(bootstrap, topic) == before
    found = offset_for_time(bootstrap, topic, t0 + 1)
    assert (found["error_code"], found["offset"], found["timestamp"]) == (0, 1, t0 + 1), found
    past = offset_for_time(bootstrap, topic, t0 + 10)
    assert (past["error_code"], past["offset"]) == (0, -1), past
    assert_alive(bootstrap)


@pytest.mark.parametrize("codec", [0, 1], ids=["plain", "gzip"])
def test_lying_batch_on_disk_survives_restart(broker, codec):
    # A batch that lies about its records already in a segment (written by an older Kelp, or
    # damage that kept the CRC): Kelp starts, answers ListOffsets by timestamp and keeps
    # appending. Recovery cuts an uncompressed liar like a torn write; a compressed one is not
    # inflated at start-up, and the lookup that reaches it skips it as corrupt.
    if broker.external:
        pytest.skip("KELP_BOOTSTRAP: the test writes into the broker's data directory")
    from conftest import running_broker
    from test_storage_local import LocalBroker

    with running_broker(LocalBroker, "kelp-liar-") as b:
        name = f"kelp-liar-{uuid.uuid4().hex[:10]}"
        create_topic(b.bootstrap, name, 1)
        t0 = produce_known_records(b.bootstrap, name)
        b.stop()
        seg = os.path.join(b.data_dir, "topics", f"{name}-0", "00000000000000000000.log")
        with open(seg, "ab") as f:
            f.write(lying_batch(I32_MAX, I32_MAX - 1, t0 + 10, codec, base_offset=3))
        since = b.log_size()
        b.start()
        found = offset_for_time(b.bootstrap, name, t0 + 1)
        assert (found["error_code"], found["offset"]) == (0, 1), found
        past = offset_for_time(b.bootstrap, name, t0 + 10)
        assert (past["error_code"], past["offset"]) == (0, -1), past
        assert_alive(b.bootstrap)
        log = b.log_tail(since)
        if codec == 0:
            assert latest_offset(b.bootstrap, name) == 3
            assert "damaged or torn batch" in log, log
        else:
            assert "skipping a corrupt record batch" in log, log
        p = produce(b.bootstrap, 9, name, kwire.record_batch([b"after"], base_timestamp=t0 + 20))
        assert p["error_code"] == 0, p
        assert offset_for_time(b.bootstrap, name, t0 + 20)["offset"] == p["base_offset"]
        # And once more: the same data again at start-up.
        b.restart()
        assert offset_for_time(b.bootstrap, name, t0 + 1)["offset"] == 1
        assert b.alive()
