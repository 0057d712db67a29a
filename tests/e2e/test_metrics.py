"""Prometheus /metrics: after real produce and fetch traffic, the endpoint parses with the
reference Prometheus text parser (prometheus_client) and carries per-core produce/fetch bytes
and requests, latency summaries, connections and cache bytes."""

import os
import signal
import tempfile
import time
import uuid

import conftest
import kwire
from conftest import Broker, free_port, metric_families, sample_total, scrape


def fetch_totals(mport):
    """(fetch requests, fetch response bytes) over all shards."""
    fams = metric_families(scrape(mport))
    return (sample_total(fams, "kelp_requests", "_total", kind="fetch"),
            sample_total(fams, "kelp_fetch_bytes", "_total"))


def fetch_counts_before_answers(bootstrap, mport, topic, rounds=30):
    """A fetch whose answer the client holds is already in /metrics, to the byte: each round
    one raw Fetch v4 (partition 0 from offset 0), then a scrape."""
    body = (kwire.i32(-1) + kwire.i32(0) + kwire.i32(0) + kwire.i32(1 << 20) + kwire.i8(0)
            + kwire.array([kwire.string(topic) + kwire.array(
                [kwire.i32(0) + kwire.i64(0) + kwire.i32(1 << 20)])]))
    with kwire.Conn(bootstrap) as conn:
        reqs, sent = fetch_totals(mport)
        for i in range(rounds):
            corr = conn.send_request(kwire.FETCH, 4, body)
            frame = conn.recv_frame()
            assert len(frame) > 100, "partition 0 holds records"
            now_reqs, now_sent = fetch_totals(mport)
            assert (now_reqs - reqs, now_sent - sent) == (1, len(frame) + 4), (i, corr)
            reqs, sent = now_reqs, now_sent


def metrics_broker(request, data_dir, mport):
    """A Broker (not started) over `data_dir` serving /metrics on `mport`, on the suite's
    storage engine (with the suite's SeaweedFS on seaweedmq)."""
    sw = (request.getfixturevalue("seaweed_cluster")
          if conftest.STORAGE == "seaweedmq" else None)
    return Broker(data_dir, ["--metrics-addr", f"127.0.0.1:{mport}"], seaweed=sw)


def test_metrics_parse_and_count_traffic(request):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    mport = free_port()
    with tempfile.TemporaryDirectory(prefix="kelp-metrics-") as d:
        b = metrics_broker(request, d, mport)
        b.start()
        try:
            topic = f"m-{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(15)
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2})
            n = 500
            for i in range(n):
                p.produce(topic, key=str(i).encode(), value=b"x" * 100)
            assert p.flush(20) == 0
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}",
                          "enable.auto.commit": False})
            c.assign([TopicPartition(topic, i, 0) for i in range(4)])
            got, deadline = 0, time.time() + 20
            while got < n and time.time() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got += 1
            assert got == n
            text = scrape(mport)
            c.close()
            fetch_counts_before_answers(b.bootstrap, mport, topic)
        finally:
            b.stop()
            b.log.close()

    fams = metric_families(text)
    for name in ["kelp_connections", "kelp_cache_bytes", "kelp_produce_bytes",
                 "kelp_fetch_bytes", "kelp_requests", "kelp_request_latency_seconds"]:
        assert name in fams, (name, sorted(fams))

    def total(fam, suffix="", **labels):
        return sample_total(fams, fam, suffix, **labels)

    shards = {s.labels["shard"] for s in fams["kelp_cache_bytes"].samples}
    assert len(shards) == min(2, os.cpu_count() or 1), shards
    assert total("kelp_produce_bytes", "_total") >= n * 100
    assert total("kelp_fetch_bytes", "_total") >= n * 100
    assert total("kelp_cache_bytes") >= n * 100
    assert total("kelp_requests", "_total", kind="produce") >= 1
    assert total("kelp_requests", "_total", kind="fetch") >= 1
    assert total("kelp_connections") >= 1, "the consumer was still connected at scrape time"
    assert total("kelp_request_latency_seconds", "_count", kind="produce") >= 1
    p99 = [s.value for s in fams["kelp_request_latency_seconds"].samples
           if s.labels.get("quantile") == "0.99" and s.labels.get("kind") == "produce"]
    assert p99 and all(v >= 0 for v in p99) and max(p99) > 0
    if conftest.STORAGE == "seaweedmq":
        # The forwarder's queue depth and what SeaweedMQ acknowledged.
        assert "kelp_forwarder_queue_depth" in fams
        assert total("kelp_forwarder_inflight_bytes") >= 0
        assert total("kelp_forwarder_published_records", "_total") >= n
        assert total("kelp_forwarder_streams_opened", "_total") >= 4


def health(mport, method="GET"):
    """(status, body) of /health on 127.0.0.1:mport; None while nothing listens there."""
    import urllib.error
    import urllib.request
    req = urllib.request.Request(f"http://127.0.0.1:{mport}/health", method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (ConnectionError, urllib.error.URLError):
        return None


def check_not_ready_body(body):
    """A 503's body names, line by line, what does not serve."""
    lines = body.splitlines()
    assert lines, body
    for line in lines:
        assert (line == "shutting down" or line.startswith("starting")
                or line.endswith("not started") or "no heartbeat" in line), body


def samples(text, fam, suffix="", **labels):
    """{frozen labels: value} of family fam's samples named fam + suffix matching labels."""
    fams = metric_families(text)
    if fam not in fams:
        return {}
    return {tuple(sorted(s.labels.items())): s.value for s in fams[fam].samples
            if s.name == fam + suffix
            and all(s.labels.get(k) == v for k, v in labels.items())}


def value(text, fam, suffix="", **labels):
    """The one sample of fam matching labels, or None."""
    found = samples(text, fam, suffix, **labels)
    assert len(found) <= 1, found
    return next(iter(found.values()), None)


def wait_scrape(mport, ok, what, timeout=20):
    """Scrapes until ok(text) holds (gauges follow the shards, not the client's ack)."""
    deadline = time.time() + timeout
    while True:
        text = scrape(mport)
        if ok(text):
            return text
        if time.time() > deadline:
            raise AssertionError(f"{what}; last scrape:\n{text}")
        time.sleep(0.1)


def raw_produce_error(bootstrap, topic, partition):
    """The error code Kelp answers a Produce v7 of one record to topic-partition with."""
    records = kwire.record_batch([b"v"])
    with kwire.Conn(bootstrap) as c:
        r = c.roundtrip(kwire.PRODUCE, 7, kwire.produce_body(7, topic, partition, records))
        res = kwire.parse_produce(r, 7)
    return res[(topic, partition)]["error_code"]


ERROR_NAMES = {kwire.UNKNOWN_TOPIC_OR_PARTITION: "UNKNOWN_TOPIC_OR_PARTITION",
               kwire.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
               kwire.TOPIC_ALREADY_EXISTS: "TOPIC_ALREADY_EXISTS"}


def test_health_offsets_lag_errors_and_storage(request):
    """/health answers 503 (what is not ready) until every shard serves, then 200; the
    partition gauges equal the real end offsets, lag = end - committed for a group's real
    commits, request errors are counted by API and Kafka name, and acks=all on local times
    its fdatasyncs."""
    import subprocess
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    mport = free_port()
    with tempfile.TemporaryDirectory(prefix="kelp-metrics-") as d:
        b = metrics_broker(request, d, mport)
        # Spawned by hand to ask /health from the first moment the metrics port answers:
        # until every shard serves, 503 naming what is not ready; then 200 "ready".
        b.proc = subprocess.Popen(b.args(), stdout=b.log, stderr=b.log)
        try:
            seen, deadline = [], time.time() + 30
            while time.time() < deadline and b.proc.poll() is None:
                h = health(mport)
                if h is not None:
                    seen.append(h)
                    if h[0] == 200:
                        break
                time.sleep(0.005)
            assert seen and seen[-1] == (200, "ready\n"), seen[-5:]
            for status, body in seen[:-1]:
                assert status == 503, seen
                check_not_ready_body(body)
            assert health(mport, "HEAD") == (200, "")
            conftest.wait_port(b.port, b.proc)
            text = scrape(mport)
            assert value(text, "kelp_ready") == 1
            ups = samples(text, "kelp_shard_up")
            assert ups and set(ups.values()) == {1}, ups
            assert len(samples(text, "kelp_build_info")) == 1
            assert value(text, "kelp_start_time_seconds") > time.time() - 600
            free = value(text, "kelp_data_dir_free_bytes")
            size = value(text, "kelp_data_dir_size_bytes")
            assert size > 0 and 0 <= free <= size, (free, size)

            topic = f"lag-{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
            syncs = "kelp_storage_latency_seconds"
            local = conftest.STORAGE == "local"
            syncs_before = value(text, syncs, "_count", engine="local", op="sync") if local else 0
            n = 60
            p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5})
            for i in range(n):
                p.produce(topic, value=b"x" * 50, partition=i % 2)
            assert p.flush(20) == 0
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}",
                          "enable.auto.commit": False})
            ends = {i: c.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[1]
                    for i in range(2)}
            assert sum(ends.values()) == n, ends
            committed = {0: 7, 1: 3}
            c.commit(offsets=[TopicPartition(topic, i, o) for i, o in committed.items()],
                     asynchronous=False)
            group = f"g-{topic}"

            def shows_offsets(text):
                return all(
                    value(text, "kelp_partition_high_watermark", topic=topic, partition=str(i))
                    == ends[i]
                    and value(text, "kelp_consumer_group_committed_offset", group=group,
                              topic=topic, partition=str(i)) == committed[i]
                    for i in range(2))

            text = wait_scrape(mport, shows_offsets, "high watermarks and commits")
            for i in range(2):
                lab = dict(topic=topic, partition=str(i))
                assert value(text, "kelp_consumer_group_lag", group=group, **lab) \
                    == ends[i] - committed[i]
                assert value(text, "kelp_partition_log_start_offset", **lab) == 0
                log_size = value(text, "kelp_partition_log_size_bytes", **lab)
                if conftest.STORAGE == "seaweedmq":
                    assert log_size is None, "SeaweedMQ's log size is not known here"
                else:
                    assert log_size > 50 * (ends[i] // 2), (log_size, ends[i])
            if local:
                # acks=all waited for fdatasyncs, timed on the shard that ran them.
                assert value(text, syncs, "_count", engine="local", op="sync") > syncs_before
                assert value(text, syncs, "_bucket", engine="local", op="sync", le="+Inf") \
                    == value(text, syncs, "_count", engine="local", op="sync")
            elif conftest.STORAGE == "seaweedmq":
                assert value(text, syncs, "_count", engine="seaweedmq", op="publish") >= 1
            else:
                assert syncs not in metric_families(text)

            # Real errors, counted under the API and Kafka's error name.
            code = raw_produce_error(b.bootstrap, topic, 9)
            assert code in ERROR_NAMES, code
            try:
                admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
                raise AssertionError("a second create of the topic succeeded")
            except KafkaException as e:
                assert e.args[0].code() == kwire.TOPIC_ALREADY_EXISTS, e
            text = scrape(mport)
            # prometheus_client names a counter family without its _total.
            errors = "kelp_request_errors"
            assert (value(text, errors, "_total", api="Produce", error=ERROR_NAMES[code])
                    or 0) >= 1, samples(text, errors, "_total")
            assert value(text, errors, "_total", api="CreateTopics",
                         error="TOPIC_ALREADY_EXISTS") >= 1
            assert value(text, "kelp_requests_by_api", "_total", api="Produce") >= 1

            # Deleting the group's offsets and the topic removes their series.
            c.close()
            admin.delete_consumer_groups([group])[group].result(15)
            admin.delete_topics([topic])[topic].result(15)
            wait_scrape(mport, lambda t: f'topic="{topic}"' not in t,
                        "series of the deleted topic and group")

            # From SIGTERM on, /health answers 503 "shutting down" until the port closes
            # (a probe that beat the signal thread to the flag may still get 200 first).
            os.kill(b.proc.pid, signal.SIGTERM)
            after, deadline = [], time.time() + 30
            while time.time() < deadline:
                h = health(mport)
                if h is None and b.proc.poll() is not None:
                    break
                if h is not None:
                    after.append(h)
                time.sleep(0.005)
            statuses = [st for st, _ in after]
            assert statuses == sorted(statuses), after  # no 200 after a 503
            # The odd answers themselves: pytest cuts a long list before them.
            odd = [h for h in after if h[0] != 200 and h != (503, "shutting down\n")]
            assert not odd, (odd, len(after))
        finally:
            b.stop()
            b.log.close()


def test_transactional_offsets_show_once_the_transaction_commits(request):
    """TxnOffsetCommit: a group's offsets sent in a transaction are not committed (no
    series) while it is open, or after an abort; they show, with their lag, once it
    commits."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    mport = free_port()
    with tempfile.TemporaryDirectory(prefix="kelp-metrics-") as d:
        b = metrics_broker(request, d, mport)
        b.start()
        try:
            src, dst = (f"txo-{uuid.uuid4().hex[:8]}" for _ in range(2))
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            for t in (src, dst):
                admin.create_topics([NewTopic(t, 1, 1)])[t].result(15)
            seed = Producer({"bootstrap.servers": b.bootstrap})
            for i in range(10):
                seed.produce(src, value=f"v{i}".encode())
            assert seed.flush(20) == 0
            group = f"txg-{uuid.uuid4().hex[:6]}"
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                          "enable.auto.commit": False})
            p = Producer({"bootstrap.servers": b.bootstrap,
                          "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
            p.init_transactions(30)
            committed = "kelp_consumer_group_committed_offset"

            def shown(text):
                return value(text, committed, group=group, topic=src, partition="0")

            for outcome, offset in (("abort", 4), ("commit", 6)):
                p.begin_transaction()
                p.produce(dst, value=b"out")
                p.send_offsets_to_transaction([TopicPartition(src, 0, offset)],
                                              c.consumer_group_metadata(), 30)
                assert shown(scrape(mport)) is None, "offsets of an open transaction"
                if outcome == "abort":
                    p.abort_transaction(30)
                    assert shown(scrape(mport)) is None, "offsets of an aborted transaction"
                else:
                    p.commit_transaction(30)
            text = wait_scrape(mport, lambda t: shown(t) == 6, "the transaction's offsets")
            assert value(text, "kelp_consumer_group_lag", group=group, topic=src,
                         partition="0") == 10 - 6
            c.close()
        finally:
            b.stop()
            b.log.close()
