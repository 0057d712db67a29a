"""Prometheus /metrics: after real produce and fetch traffic, the endpoint parses with the
reference Prometheus text parser (prometheus_client) and carries per-core produce/fetch bytes
and requests, latency summaries, connections and cache bytes."""

import os
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


def test_metrics_parse_and_count_traffic(request):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    mport = free_port()
    with tempfile.TemporaryDirectory(prefix="kelp-metrics-") as d:
        sw = (request.getfixturevalue("seaweed_cluster")
              if conftest.STORAGE == "seaweedmq" else None)
        b = Broker(d, ["--metrics-addr", f"127.0.0.1:{mport}"], seaweed=sw)
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
