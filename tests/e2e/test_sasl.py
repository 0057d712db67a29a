"""SASL on Kelp's listeners (SASL_SSL and SASL_PLAINTEXT beside PLAINTEXT): real clients
(confluent-kafka, the Java client) authenticate with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN as
the bootstrap admin (--sasl-bootstrap-users); Apache Kafka's own kafka-configs tool adds,
describes and deletes a user's SCRAM credentials (AlterUserScramCredentials), and the new user
signs in with them, also after a restart where the storage keeps data. A wrong password gets
SASL_AUTHENTICATION_FAILED and nothing else on that connection; a request before
authentication, or an unknown mechanism, closes the connection.

Each test starts its own Kelp (same storage as the pass)."""

import functools
import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

import conftest
import kwire
from test_listeners import ListenersBroker
from test_tls import pki, round_trip  # noqa: F401 (pki is a fixture)

pytestmark = conftest.OWN_KELPS

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
ADMIN = ("admin", "admin-secret")


@pytest.fixture
def sasl_broker(pki, sw, tmp_path):  # noqa: F811 (pki is the fixture imported above)
    users = tmp_path / "users"
    users.write_text(f"# the first admin\n{ADMIN[0]}:{ADMIN[1]}\n")
    args = ["--ssl-certificate-file", f"{pki}/server.pem", "--ssl-key-file", f"{pki}/server.key",
            "--sasl-bootstrap-users", str(users)]
    cls = functools.partial(ListenersBroker,
                            more={"SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    with conftest.running_broker(cls, "kelp-sasl-", args, seaweed=sw) as b:
        yield b


def sasl_conf(b, pki, mechanism, user, password, ssl=True):  # noqa: F811
    listener = "SASL_SSL" if ssl else "SASL_PLAINTEXT"
    c = {"bootstrap.servers": f"127.0.0.1:{b.ports[listener]}", "security.protocol": listener,
         "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}
    if ssl:
        c["ssl.ca.location"] = os.path.join(pki, "ca.pem")
    return c


def refused(conf):
    """True when the client cannot get metadata (authentication failed)."""
    try:
        AdminClient({**conf, "socket.timeout.ms": 3000}).list_topics(timeout=6)
        return False
    except KafkaException:
        return True


@conftest.ENGINE_NEUTRAL
def test_scram_and_plain_clients_over_sasl_ssl_and_sasl_plaintext(sasl_broker, pki):  # noqa: F811
    b = sasl_broker
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"):
        round_trip(sasl_conf(b, pki, mech, *ADMIN), n=60)
    round_trip(sasl_conf(b, pki, "SCRAM-SHA-512", *ADMIN, ssl=False), n=60)
    # Metadata over a SASL listener names that listener's address.
    md = AdminClient(sasl_conf(b, pki, "SCRAM-SHA-256", *ADMIN)).list_topics(timeout=10)
    assert {n.port for n in md.brokers.values()} == {b.ports["SASL_SSL"]}
    # Wrong password, unknown user, the PLAINTEXT listener still open to anyone.
    assert refused(sasl_conf(b, pki, "SCRAM-SHA-256", ADMIN[0], "wrong"))
    assert refused(sasl_conf(b, pki, "PLAIN", "nobody", ADMIN[1]))
    round_trip({"bootstrap.servers": b.bootstrap}, n=20)
    assert b.alive()


@conftest.ENGINE_NEUTRAL
def test_java_client_over_sasl_ssl_with_scram(sasl_broker, pki, tmp_path):  # noqa: F811
    conf = tmp_path / "sasl.properties"
    conf.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN[0]}" password="{ADMIN[1]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={os.path.join(pki, 'ca.pem')}\n")
    out = conftest.java_round_trip(tmp_path, f"127.0.0.1:{sasl_broker.ports['SASL_SSL']}",
                                   f"sasl-java-{uuid.uuid4().hex[:6]}", 300, config=conf)
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-4000:]}"
    assert out.stdout.count(" 300") == 5, out.stdout


@conftest.ENGINE_NEUTRAL
def test_kafkajs_over_sasl_ssl(sasl_broker, pki):  # noqa: F811
    """kafkajs (tests/node) consumers in one group over SASL_SSL with SCRAM-SHA-512 and with
    PLAIN; a wrong password fails its connect with an authentication error."""
    node = conftest.kafkajs_dir()
    bs = f"127.0.0.1:{sasl_broker.ports['SASL_SSL']}"

    def run(sasl):
        topic = f"js-{uuid.uuid4().hex[:8]}"
        env = dict(os.environ, KELP_SSL_CA=os.path.join(pki, "ca.pem"), KELP_SASL=sasl)
        return subprocess.run(["node", "groupcheck.js", bs, topic, f"g-{topic}", "300"],
                              cwd=node, env=env, capture_output=True, text=True, timeout=90)

    for mech in ("scram-sha-512", "plain"):
        out = run(f"{mech}:{ADMIN[0]}:{ADMIN[1]}")
        assert out.returncode == 0 and "OK 300" in out.stdout, out.stdout + out.stderr[-3000:]
    out = run(f"scram-sha-256:{ADMIN[0]}:wrong")
    assert out.returncode != 0 and "FAIL connect" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "SASL" in out.stdout or "uthentication" in out.stdout, out.stdout


def configs(b, pki, tmp_path, *args):  # noqa: F811
    """kafka-configs (Kafka's ConfigCommand) against the SASL_SSL listener as the admin."""
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN[0]}" password="{ADMIN[1]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={os.path.join(pki, 'ca.pem')}\n")
    r = conftest.kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server",
                            f"127.0.0.1:{b.ports['SASL_SSL']}", "--command-config", str(props),
                            *args)
    assert r.returncode == 0, f"kafka-configs {args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_kafka_configs_manages_scram_users(sasl_broker, pki, tmp_path):  # noqa: F811
    b = sasl_broker
    user = f"bob-{uuid.uuid4().hex[:6]}"
    assert refused(sasl_conf(b, pki, "SCRAM-SHA-256", user, "bob-secret"))
    configs(b, pki, tmp_path, "--alter", "--entity-type", "users", "--entity-name", user,
            "--add-config", "SCRAM-SHA-256=[iterations=8192,password=bob-secret],"
                            "SCRAM-SHA-512=[password=bob-secret]")
    out = configs(b, pki, tmp_path, "--describe", "--entity-type", "users", "--entity-name", user)
    assert "SCRAM-SHA-256=iterations=8192" in out and "SCRAM-SHA-512=iterations=4096" in out, out
    round_trip(sasl_conf(b, pki, "SCRAM-SHA-256", user, "bob-secret"), n=30)
    round_trip(sasl_conf(b, pki, "PLAIN", user, "bob-secret"), n=30)
    assert refused(sasl_conf(b, pki, "SCRAM-SHA-512", user, "not-bob"))

    configs(b, pki, tmp_path, "--alter", "--entity-type", "users", "--entity-name", user,
            "--delete-config", "SCRAM-SHA-256")
    assert refused(sasl_conf(b, pki, "SCRAM-SHA-256", user, "bob-secret"))
    out = configs(b, pki, tmp_path, "--describe", "--entity-type", "users", "--entity-name", user)
    assert "SCRAM-SHA-256" not in out and "SCRAM-SHA-512=iterations=4096" in out, out

    if conftest.STORAGE != "memory":
        # Durable where the data is: the credential outlives a restart.
        b.restart()
        round_trip(sasl_conf(b, pki, "SCRAM-SHA-512", user, "bob-secret"), n=10)


def handshake(c, mechanism):
    c.send_request(SASL_HANDSHAKE, 1, kwire.string(mechanism))
    _, r = c.recv_response(SASL_HANDSHAKE, 1)
    err, n = r.i16(), r.array_len()
    return err, [r.string() for _ in range(n)]


def authenticate(c, token):
    """SaslAuthenticate v1: (error code, message, auth bytes)."""
    c.send_request(SASL_AUTHENTICATE, 1, kwire.nbytes(token))
    _, r = c.recv_response(SASL_AUTHENTICATE, 1)
    return r.i16(), r.string(), r.nbytes(), r.i64()


def metadata(c):
    c.send_request(METADATA, 1, kwire.metadata_body(1, None))


def closed(c):
    ok, _ = c.wait_closed(timeout=10)
    return ok


def test_wrong_password_gets_sasl_authentication_failed_and_nothing_else(sasl_broker):
    port = sasl_broker.ports["SASL_PLAINTEXT"]
    bs = f"127.0.0.1:{port}"
    # Anything but ApiVersions and the handshake before authenticating: closed.
    with kwire.Conn(bs) as c:
        assert kwire.parse_api_versions(c.roundtrip(18, 0, b""), 0)["error_code"] == 0
        metadata(c)
        assert closed(c)
    # A wrong password: SASL_AUTHENTICATION_FAILED, then the connection closes.
    with kwire.Conn(bs) as c:
        err, mechs = handshake(c, "PLAIN")
        assert err == 0 and {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} <= set(mechs)
        err, msg, _, _ = authenticate(c, b"\0" + ADMIN[0].encode() + b"\0wrong")
        assert err == 58, (err, msg)
        metadata(c)
        assert closed(c)
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM, closed.
    with kwire.Conn(bs) as c:
        err, mechs = handshake(c, "GSSAPI")
        assert err == 33 and "PLAIN" in mechs
        assert closed(c)
    # Malformed SCRAM messages: refused, and Kelp stays up.
    for bad in (b"n,,n", b"n,,n=admin,r", b"", b"\xff" * 100):
        with kwire.Conn(bs) as c:
            assert handshake(c, "SCRAM-SHA-256")[0] == 0
            assert authenticate(c, bad)[0] == 58
            assert closed(c)
    # The right password: served.
    with kwire.Conn(bs) as c:
        assert handshake(c, "PLAIN")[0] == 0
        err, _, _, lifetime = authenticate(c, b"\0" + ADMIN[0].encode() + b"\0" + ADMIN[1].encode())
        assert (err, lifetime) == (0, 0)
        c.send_request(METADATA, 1, kwire.metadata_body(1, None))
        _, r = c.recv_response(METADATA, 1)
        assert kwire.parse_metadata(r, 1)["brokers"]
    assert sasl_broker.alive()


@conftest.ENGINE_NEUTRAL
def test_reauthentication_kip_368(pki, sw, tmp_path):  # noqa: F811
    """With --connections-max-reauth-ms the session has a lifetime: a connection that does
    not re-authenticate within it is closed at its next request, and Apache Kafka's console
    consumer, idle on its connections for longer than two lifetimes, re-authenticates them
    in place (KIP-368) and is never cut off."""
    users = tmp_path / "users"
    users.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
    cls = functools.partial(ListenersBroker, more={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    args = ["--sasl-bootstrap-users", str(users), "--connections-max-reauth-ms", "4000",
            "--log-level", "info,kelp::auth=debug"]
    with conftest.running_broker(cls, "kelp-reauth-", args, seaweed=sw) as b:
        bs = f"127.0.0.1:{b.ports['SASL_PLAINTEXT']}"
        since = b.log_size()
        with kwire.Conn(bs) as c:
            assert handshake(c, "PLAIN")[0] == 0
            token = b"\0" + ADMIN[0].encode() + b"\0" + ADMIN[1].encode()
            err, _, _, lifetime = authenticate(c, token)
            assert (err, lifetime) == (0, 4000)
            # Re-authenticating as the same user renews the session.
            assert handshake(c, "PLAIN")[0] == 0
            assert authenticate(c, token)[0] == 0
            metadata(c)
            c.recv_response(METADATA, 1)
            time.sleep(4.5)
            metadata(c)
            assert closed(c)
        deadline = time.time() + 10
        while "ran out" not in b.log_tail(since) and time.time() < deadline:
            time.sleep(0.1)
        assert "ran out" in b.log_tail(since)

        since = b.log_size()
        topic = f"reauth-{uuid.uuid4().hex[:6]}"
        conf = tmp_path / "reauth.properties"
        conf.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{ADMIN[0]}" password="{ADMIN[1]}";\n')
        r = conftest.kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                                "--bootstrap-server", bs, "--consumer.config", str(conf),
                                "--topic", topic, "--from-beginning", "--timeout-ms", "11000",
                                "--group", f"g-{topic}")
        assert "Processed a total of 0 messages" in r.stdout + r.stderr, r.stderr[-3000:]
        log = b.log_tail(since)
        assert "re-authenticated" in log, log[-3000:]
        assert "ran out" not in log, log[-3000:]


def test_sasl_flags_that_cannot_work_stop_the_start(tmp_path):
    for flags, says in [
        (["--sasl-enabled-mechanisms", "GSSAPI"], "GSSAPI"),
        (["--sasl-bootstrap-users", str(tmp_path / "missing")], "--sasl-bootstrap-users"),
    ]:
        r = subprocess.run([str(conftest.KELP), "--storage", "memory", "--listen",
                            "127.0.0.1:0", "--data-dir", str(tmp_path), *flags],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and says in r.stderr + r.stdout, r.stderr[-2000:]

