"""TLS on Kelp's listener (--security-protocol SSL): real clients (confluent-kafka, the Java
client) produce and consume over TLS, verifying Kelp's certificate against a CA this test
makes with openssl (never a committed key); with --ssl-client-ca-file a client must show a
certificate from that CA (mTLS). A plaintext client, a client trusting another CA, an expired
server certificate and a client without a certificate on an mTLS listener all fail their
connection, and Kelp keeps serving the good ones. SIGHUP reloads the certificate files.

Each test starts its own Kelp; TLS stores nothing, so only the local pass runs them."""

import datetime
import functools
import os
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import conftest
import kwire
from conftest import require

pytestmark = conftest.ENGINE_NEUTRAL


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def make_cert(d, ca, name, cn, days=2, expired=False, subj=None):
    """A certificate for `cn` (SAN IP 127.0.0.1; subject /CN=cn unless `subj`) signed by `ca`;
    `expired`: valid only in the past."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj or f"/CN={cn}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    if expired:
        # openssl x509 cannot backdate; `openssl ca` can, with a minimal config.
        start = (datetime.datetime.now(datetime.timezone.utc)
                 - datetime.timedelta(days=10)).strftime("%Y%m%d%H%M%SZ")
        end = (datetime.datetime.now(datetime.timezone.utc)
               - datetime.timedelta(days=1)).strftime("%Y%m%d%H%M%SZ")
        os.makedirs(os.path.join(d, "db"), exist_ok=True)
        open(os.path.join(d, "db", "index.txt"), "w").close()
        with open(os.path.join(d, "ca.cnf"), "w") as f:
            f.write("[ca]\ndefault_ca=c\n[c]\ndatabase=db/index.txt\nnew_certs_dir=db\n"
                    "serial=db/serial\ndefault_md=sha256\npolicy=p\ncopy_extensions=copy\n"
                    "[p]\ncommonName=supplied\n")
        with open(os.path.join(d, "db", "serial"), "w") as f:
            f.write("01\n")
        openssl("ca", "-batch", "-config", "ca.cnf", "-cert", f"{ca}.pem", "-keyfile", f"{ca}.key",
                "-startdate", start, "-enddate", end, "-extfile", f"{name}.ext",
                "-in", f"{name}.csr", "-out", f"{name}.pem", cwd=d)
    else:
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", str(days), "-extfile", f"{name}.ext",
                "-out", f"{name}.pem", cwd=d)


@pytest.fixture
def pki(tmp_path):
    require(shutil.which("openssl") is not None, "openssl")
    d = str(tmp_path)
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    make_cert(d, "ca", "server", "127.0.0.1")
    make_cert(d, "ca", "old", "127.0.0.1", expired=True)
    make_cert(d, "ca", "client", "alice")
    make_cert(d, "other-ca", "stranger", "mallory")
    return d


def ssl_broker(pki, sw, server="server", client_ca=None, shards=False):
    args = ["--security-protocol", "SSL",
            "--ssl-certificate-file", os.path.join(pki, f"{server}.pem"),
            "--ssl-key-file", os.path.join(pki, f"{server}.key")]
    if client_ca:
        args += ["--ssl-client-ca-file", os.path.join(pki, f"{client_ca}.pem")]
    cls = functools.partial(conftest.Broker, advertise_shards=shards)
    return conftest.running_broker(cls, "kelp-tls-", args, seaweed=sw)


def tls_conf(bs, pki, ca="ca", cert=None):
    c = {"bootstrap.servers": bs, "security.protocol": "SSL",
         "ssl.ca.location": os.path.join(pki, f"{ca}.pem"),
         "ssl.endpoint.identification.algorithm": "https"}
    if cert:
        c["ssl.certificate.location"] = os.path.join(pki, f"{cert}.pem")
        c["ssl.key.location"] = os.path.join(pki, f"{cert}.key")
    return c


def round_trip(conf, n=200):
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({**conf, "linger.ms": 5})
    sent = [f"v{i}".encode() * 50 for i in range(n)]
    for i, v in enumerate(sent):
        p.produce(topic, key=str(i).encode(), value=v)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.time() + 60
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert sorted(got) == sorted(sent), f"{len(got)} of {n} back"


def cannot_connect(conf):
    """True when the client gets no metadata within 5 s."""
    try:
        AdminClient({**conf, "socket.timeout.ms": 3000}).list_topics(timeout=5)
        return False
    except KafkaException:
        return True


def test_clients_produce_and_consume_over_tls(pki, sw):
    with ssl_broker(pki, sw) as b:
        round_trip(tls_conf(b.bootstrap, pki))
        # A client trusting another CA does not get in; a plaintext client is closed.
        assert cannot_connect(tls_conf(b.bootstrap, pki, ca="other-ca"))
        # (it gets a TLS alert record, no Kafka frame, then the close)
        with pytest.raises((kwire.Closed, kwire.Truncated, ConnectionError, OSError, ValueError)):
            kwire.api_versions(b.bootstrap, 3, timeout=5)
        # Kelp still serves TLS clients after those.
        round_trip(tls_conf(b.bootstrap, pki), n=20)
        assert b.alive()


def test_every_shard_port_speaks_tls_with_advertise_shards(pki, sw):
    """With --advertise-shards clients go straight to each shard's own port: those speak TLS
    too."""
    with ssl_broker(pki, sw, shards=True) as b:
        assert b.shard_base_port
        md = AdminClient(tls_conf(b.bootstrap, pki)).list_topics(timeout=10)
        assert {n.port for n in md.brokers.values()} >= {b.shard_base_port}, md.brokers
        round_trip(tls_conf(b.bootstrap, pki), n=100)


def test_an_expired_certificate_is_refused_by_clients(pki, sw):
    with ssl_broker(pki, sw, server="old") as b:
        assert cannot_connect(tls_conf(b.bootstrap, pki))
        assert b.alive()


def test_mutual_tls_requires_a_client_certificate_from_the_ca(pki, sw, tmp_path):
    """confluent-kafka, the Java client (PEM keystore) and kafkajs show the client certificate
    and are served; without one, or with one from another CA, a client is refused."""
    with ssl_broker(pki, sw, client_ca="ca") as b:
        round_trip(tls_conf(b.bootstrap, pki, cert="client"), n=50)
        assert cannot_connect(tls_conf(b.bootstrap, pki))
        assert cannot_connect(tls_conf(b.bootstrap, pki, cert="stranger"))

        keystore = tmp_path / "client-keystore.pem"
        keystore.write_text(open(os.path.join(pki, "client.key")).read()
                            + open(os.path.join(pki, "client.pem")).read())
        conf = tmp_path / "mtls.properties"
        conf.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                        f"ssl.truststore.location={os.path.join(pki, 'ca.pem')}\n"
                        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n")
        out = conftest.java_round_trip(tmp_path, b.bootstrap, f"mtls-java-{uuid.uuid4().hex[:6]}",
                                       200, config=conf)
        assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-4000:]}"
        assert out.stdout.count(" 200") == 5, out.stdout

        node = conftest.kafkajs_dir()
        topic = f"mtls-js-{uuid.uuid4().hex[:8]}"
        env = dict(os.environ, KELP_SSL_CA=os.path.join(pki, "ca.pem"),
                   KELP_SSL_CERT=os.path.join(pki, "client.pem"),
                   KELP_SSL_KEY=os.path.join(pki, "client.key"))
        out = subprocess.run(["node", "groupcheck.js", b.bootstrap, topic, f"g-{topic}", "200"],
                             cwd=node, env=env, capture_output=True, text=True, timeout=90)
        assert out.returncode == 0 and "OK 200" in out.stdout, out.stdout + out.stderr[-3000:]
        assert b.alive()


def test_a_bad_certificate_file_stops_the_start_with_its_name(tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    r = subprocess.run([str(conftest.KELP), "--listen", "127.0.0.1:0", "--storage", "memory",
                        "--security-protocol", "SSL", "--ssl-certificate-file", str(bad),
                        "--ssl-key-file", str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "--ssl-certificate-file" in r.stderr + r.stdout, r.stderr[-2000:]


def test_java_client_over_tls(pki, sw, tmp_path):
    """The Java client (kafka-clients 4.x) over TLS: every codec round-trips, trusting the
    test CA from a PEM truststore (KIP-651)."""
    conf = tmp_path / "tls.properties"
    conf.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={os.path.join(pki, 'ca.pem')}\n")
    with ssl_broker(pki, sw) as b:
        out = conftest.java_round_trip(tmp_path, b.bootstrap, f"tls-java-{uuid.uuid4().hex[:6]}",
                                       500, config=conf)
        assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-4000:]}"
        assert out.stdout.count(" 500") == 5, out.stdout


def test_sighup_reloads_the_certificate(pki, sw, tmp_path):
    """SIGHUP reads the certificate files again: new connections get the new certificate,
    and a file that does not parse leaves the one in use."""
    make_cert(pki, "other-ca", "server2", "127.0.0.1")
    live = tmp_path / "live"
    live.mkdir()
    for ext in ("pem", "key"):
        shutil.copy(os.path.join(pki, f"server.{ext}"), live / f"server.{ext}")
    args = ["--security-protocol", "SSL", "--ssl-certificate-file", str(live / "server.pem"),
            "--ssl-key-file", str(live / "server.key")]
    with conftest.running_broker(conftest.Broker, "kelp-tls-reload-", args, seaweed=sw) as b:
        round_trip(tls_conf(b.bootstrap, pki), n=20)

        # A broken file: logged, and the old certificate still serves.
        (live / "server.pem").write_text("garbage\n")
        b.sighup("TLS reload failed")
        round_trip(tls_conf(b.bootstrap, pki), n=20)
        # The certificate from the other CA: clients of the old CA are refused now.
        for ext in ("pem", "key"):
            shutil.copy(os.path.join(pki, f"server2.{ext}"), live / f"server.{ext}")
        b.sighup("TLS certificates reloaded")
        assert cannot_connect(tls_conf(b.bootstrap, pki))
        round_trip(tls_conf(b.bootstrap, pki, ca="other-ca"), n=20)
        assert b.alive()
