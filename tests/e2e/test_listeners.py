"""Named listeners (--listeners, --advertised-listeners, --listener-security-protocol-map), as
Kafka's: one Kelp serves a PLAINTEXT, an SSL and a custom-named listener at once; Metadata
and FindCoordinator answer each client with the addresses of the listener it came in on, so
a client of each listener produces and consumes (a consumer group included) through its own
listener only; with --advertise-shards every shard is a node on every listener. Bad listener
flags stop the start with a message naming the listener.

Each test starts its own Kelp (same storage as the pass)."""

import functools
import os
import subprocess

import pytest
from confluent_kafka.admin import AdminClient

import conftest
from test_tls import pki, round_trip, tls_conf  # noqa: F401 (pki is a fixture)

pytestmark = conftest.OWN_KELPS


class ListenersBroker(conftest.Broker):
    """A Kelp with --listeners: PLAINTEXT on `port` first, then `more` (name → protocol)
    each on a port of its own (followed by free ports for its shards)."""

    def __init__(self, data_dir, extra_args=(), seaweed=None, advertise_shards=False, more=(),
                 advertise=()):
        super().__init__(data_dir, extra_args, seaweed=seaweed, advertise_shards=advertise_shards)
        shards = shard_count() if advertise_shards else 0
        self.ports = {"PLAINTEXT": self.port}
        self.protocols = dict(more)
        self.advertise = dict(advertise)
        for name in self.protocols:
            self.ports[name] = conftest.free_port_run(1 + shards)

    def args(self):
        a = super().args()
        for flag in ("--listen", "--advertised-host"):
            i = a.index(flag)
            del a[i:i + 2]
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        custom = [f"{n}:{p}" for n, p in self.protocols.items() if n != p]
        extra = ["--listeners", listeners]
        if custom:
            extra += ["--listener-security-protocol-map", ",".join(custom)]
        if self.advertise:
            extra += ["--advertised-listeners",
                      ",".join(f"{n}://{h}:{self.ports[n]}" for n, h in self.advertise.items())]
        return a[:1] + extra + a[1:]


def shard_count():
    """How many shards the suite's Kelps run (--cores)."""
    cores = conftest.default_cores()
    if cores is None:
        return os.cpu_count() or 1
    n = 0
    for part in cores.split(","):
        a, _, b = part.partition("-")
        n += int(b or a) - int(a) + 1
    return n


def listeners_broker(pki, sw, more, shards=False, advertise=()):
    args = ["--ssl-certificate-file", f"{pki}/server.pem", "--ssl-key-file", f"{pki}/server.key"]
    cls = functools.partial(ListenersBroker, advertise_shards=shards, more=more,
                            advertise=advertise)
    return conftest.running_broker(cls, "kelp-listeners-", args, seaweed=sw)


def brokers_seen(conf):
    md = AdminClient(conf).list_topics(timeout=20)
    return sorted((b.id, b.host, b.port) for b in md.brokers.values())


def test_each_listener_advertises_itself_and_serves_its_clients(pki, sw):
    more = {"SSL": "SSL", "INTERNAL": "PLAINTEXT"}
    with listeners_broker(pki, sw, more, advertise={"INTERNAL": "localhost"}) as b:
        node = b.kafka_node_id
        plain = {"bootstrap.servers": f"127.0.0.1:{b.ports['PLAINTEXT']}"}
        ssl = tls_conf(f"127.0.0.1:{b.ports['SSL']}", pki)
        internal = {"bootstrap.servers": f"127.0.0.1:{b.ports['INTERNAL']}"}
        assert brokers_seen(plain) == [(node, "127.0.0.1", b.ports["PLAINTEXT"])]
        assert brokers_seen(ssl) == [(node, "127.0.0.1", b.ports["SSL"])]
        assert brokers_seen(internal) == [(node, "localhost", b.ports["INTERNAL"])]
        # Every client follows the addresses it was given: its own listener only.
        round_trip(plain)
        round_trip(ssl)
        round_trip(internal)


def test_every_shard_is_a_node_on_every_listener(pki, sw):
    with listeners_broker(pki, sw, {"SSL": "SSL"}, shards=True) as b:
        plain = {"bootstrap.servers": f"127.0.0.1:{b.ports['PLAINTEXT']}"}
        ssl = tls_conf(f"127.0.0.1:{b.ports['SSL']}", pki)
        seen_plain, seen_ssl = brokers_seen(plain), brokers_seen(ssl)
        assert len(seen_plain) == len(seen_ssl) >= 2
        assert [p for _, _, p in seen_plain] == [b.shard_base_port + i for i in range(len(seen_plain))]
        assert [p for _, _, p in seen_ssl] == [b.ports["SSL"] + 1 + i for i in range(len(seen_ssl))]
        assert [i for i, _, _ in seen_plain] == [i for i, _, _ in seen_ssl]
        round_trip(ssl)
        round_trip(plain)


@pytest.mark.parametrize("flags,says", [
    (["--listeners", "INTERNAL://127.0.0.1:0"], "--listener-security-protocol-map"),
    (["--listeners", "PLAINTEXT://127.0.0.1:0", "--advertised-listeners", "SSL://h:1"],
     "not a listener"),
    (["--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"], "SSL"),
])
def test_bad_listener_flags_stop_the_start(tmp_path, flags, says):
    r = subprocess.run([str(conftest.KELP), "--storage", "memory", "--data-dir", str(tmp_path),
                        *flags], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert says in r.stderr + r.stdout, r.stderr[-2000:]
