"""ACLs (--authorizer acl) with Kafka's semantics, driven by Apache Kafka's own kafka-acls tool
(CreateAcls, DescribeAcls, DeleteAcls) and checked with a real client (confluent-kafka) per
API: a user gets exactly what its ACLs allow (LITERAL and PREFIXED patterns, implied DESCRIBE,
a DENY winning over an ALLOW, host-specific ACLs), TOPIC_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED and CLUSTER_AUTHORIZATION_FAILED otherwise, Metadata shows only the
topics it may describe, super users may do everything, and the ACLs survive a restart where the
storage keeps data. Without an authorizer kafka-acls is told security is disabled. With mutual
TLS the principal is the client certificate's subject.

Each test starts its own Kelp (same storage as the pass), SASL_PLAINTEXT with SCRAM users."""

import functools
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                  NewTopic, ResourcePatternType, ResourceType)

import conftest
from test_listeners import ListenersBroker
from test_tls import cannot_connect, make_cert, pki, tls_conf  # noqa: F401 (pki is a fixture)

pytestmark = conftest.OWN_KELPS

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def start(sw, tmp_path, authorizer=True):
    users = tmp_path / "users"
    users.write_text("".join(f"{u}:{p}\n" for u, p in USERS.items()))
    args = ["--sasl-bootstrap-users", str(users)]
    if authorizer:
        args += ["--authorizer", "acl", "--super-users", "User:admin"]
    cls = functools.partial(ListenersBroker, more={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    return conftest.running_broker(cls, "kelp-acls-", args, seaweed=sw)


def conf(b, user):
    return {"bootstrap.servers": f"127.0.0.1:{b.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": USERS[user]}


def kafka_acls(b, tmp_path, *args, ok=True, user="admin"):
    props = tmp_path / f"{user}.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{USERS[user]}";\n')
    r = conftest.kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server",
                            f"127.0.0.1:{b.ports['SASL_PLAINTEXT']}", "--command-config",
                            str(props), *args)
    if ok:
        assert r.returncode == 0 and "Error" not in r.stdout, \
            f"kafka-acls {args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout + r.stderr


def produce(c, topic, n=5):
    """Produces n records; returns the error codes of the delivery reports (0 for success)."""
    codes = []
    p = Producer({**c, "message.timeout.ms": 10000, "retries": 0})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(),
                  on_delivery=lambda err, _m: codes.append(err.code() if err else 0))
    p.flush(20)
    return codes


def consume(c, topic, group, want):
    """Consumes with `group` until `want` records or an error; returns (values, error code)."""
    cons = Consumer({**c, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": True})
    cons.subscribe([topic])
    got, err, deadline = [], None, time.time() + 30
    try:
        while len(got) < want and time.time() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                        KafkaError.GROUP_AUTHORIZATION_FAILED):
                    err = m.error().code()
                    break
                continue
            got.append(m.value())
    finally:
        try:
            cons.close()
        except KafkaException:
            pass
    return got, err


def topics_seen(c):
    return set(AdminClient(c).list_topics(timeout=10).topics)


def admin_error(fut):
    try:
        fut.result(15)
        return None
    except KafkaException as e:
        return e.args[0].code()


def test_acls_decide_what_each_user_may_do(sw, tmp_path):
    with start(sw, tmp_path) as b:
        admin, alice, bob = conf(b, "admin"), conf(b, "alice"), conf(b, "bob")
        sfx = uuid.uuid4().hex[:6]
        orders, logs, secret = f"orders-{sfx}", f"logs-{sfx}-app", f"logs-{sfx}-secret"
        a = AdminClient(admin)
        for t in (orders, logs, secret):
            a.create_topics([NewTopic(t, 1, 1)])[t].result(30)
        assert produce(admin, orders, 10) == [0] * 10

        kafka_acls(b, tmp_path, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                   "--topic", orders, "--group", f"g-alice-{sfx}")
        kafka_acls(b, tmp_path, "--add", "--allow-principal", "User:alice", "--operation",
                   "Write", "--resource-pattern-type", "prefixed", "--topic", f"logs-{sfx}-")
        kafka_acls(b, tmp_path, "--add", "--deny-principal", "User:alice", "--operation", "All",
                   "--topic", secret)
        listed = kafka_acls(b, tmp_path, "--list", "--topic", orders)
        assert "User:alice" in listed and "READ" in listed, listed

        # alice: reads orders with her group (READ implies DESCRIBE), writes under the prefix.
        got, err = consume(alice, orders, f"g-alice-{sfx}", 10)
        assert (len(got), err) == (10, None)
        assert produce(alice, logs) == [0] * 5
        assert produce(alice, orders, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        # DENY wins over the prefixed ALLOW.
        assert produce(alice, secret, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        _, err = consume(alice, orders, f"g-other-{sfx}", 1)
        assert err == KafkaError.GROUP_AUTHORIZATION_FAILED
        seen = topics_seen(alice)
        assert orders in seen and logs in seen and secret not in seen, seen
        # The operations Metadata reports as authorized (KIP-430): READ and the DESCRIBE it
        # implies on orders.
        alice_admin = AdminClient(alice)
        desc = alice_admin.describe_topics(
            TopicCollection([orders]), include_authorized_operations=True)[orders].result(15)
        assert set(desc.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}

        # bob has no ACL: sees no topic, may neither produce, create, nor read the ACLs.
        assert not topics_seen(bob) & {orders, logs, secret}
        assert produce(bob, orders, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        bob_admin = AdminClient(bob)
        assert admin_error(bob_admin.create_topics([NewTopic(f"bob-{sfx}", 1, 1)])[
            f"bob-{sfx}"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        out = kafka_acls(b, tmp_path, "--list", ok=False, user="bob")
        assert "ClusterAuthorizationException" in out, out
        out = kafka_acls(b, tmp_path, "--add", "--allow-principal", "User:bob", "--operation",
                         "All", "--topic", "*", ok=False, user="bob")
        assert "ClusterAuthorizationException" in out, out

        # A host-specific DENY: alice from 127.0.0.1 can no longer read orders.
        kafka_acls(b, tmp_path, "--add", "--deny-principal", "User:alice", "--deny-host",
                   "127.0.0.1", "--operation", "Read", "--topic", orders)
        _, err = consume(alice, orders, f"g-alice-{sfx}-2", 1)
        assert err in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
        kafka_acls(b, tmp_path, "--remove", "--force", "--deny-principal", "User:alice",
                   "--deny-host", "127.0.0.1", "--operation", "Read", "--topic", orders)

        if conftest.STORAGE != "memory":
            b.restart()
            assert produce(alice, logs) == [0] * 5
            assert produce(alice, orders, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

        # Removing alice's prefixed WRITE takes it away.
        kafka_acls(b, tmp_path, "--remove", "--force", "--allow-principal", "User:alice",
                   "--operation", "Write", "--resource-pattern-type", "prefixed", "--topic",
                   f"logs-{sfx}-")
        assert produce(alice, logs, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert b.alive()


def test_kafka_acls_without_an_authorizer_is_told_security_is_disabled(sw, tmp_path):
    with start(sw, tmp_path, authorizer=False) as b:
        out = kafka_acls(b, tmp_path, "--list", ok=False)
        assert "SecurityDisabled" in out or "ecurity features are disabled" in out, out
        # And everyone may do everything, as with Kafka without an authorizer.
        t = f"open-{uuid.uuid4().hex[:6]}"
        bob_admin = AdminClient(conf(b, "bob"))
        bob_admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
        assert produce(conf(b, "bob"), t, 3) == [0] * 3


def test_mtls_principal_is_the_certificate_subject(pki, sw):  # noqa: F811
    """With mutual TLS the principal is `User:` and the client certificate's subject (RFC
    2253), as Kafka's: an ACL for User:CN=alice lets the client showing alice's certificate
    in, and nobody else."""
    make_cert(pki, "ca", "admin", "admin")
    args = ["--ssl-certificate-file", f"{pki}/server.pem", "--ssl-key-file", f"{pki}/server.key",
            "--ssl-client-ca-file", f"{pki}/ca.pem", "--authorizer", "acl",
            "--super-users", "User:CN=admin"]
    cls = functools.partial(ListenersBroker, more={"SSL": "SSL"})
    with conftest.running_broker(cls, "kelp-mtls-acls-", args, seaweed=sw) as b:
        ssl = f"127.0.0.1:{b.ports['SSL']}"
        admin, alice = tls_conf(ssl, pki, cert="admin"), tls_conf(ssl, pki, cert="client")
        sfx = uuid.uuid4().hex[:6]
        ok, no = f"mtls-ok-{sfx}", f"mtls-no-{sfx}"
        a = AdminClient(admin)
        for t in (ok, no):
            a.create_topics([NewTopic(t, 1, 1)])[t].result(30)
        binding = AclBinding(ResourceType.TOPIC, ok, ResourcePatternType.LITERAL, "User:CN=alice",
                             "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        a.create_acls([binding])[binding].result(15)
        assert produce(alice, ok) == [0] * 5
        assert produce(alice, no, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        # The plaintext listener's clients are User:ANONYMOUS: no ACL, nothing allowed.
        assert produce({"bootstrap.servers": b.bootstrap}, ok, 1) == \
            [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_ssl_principal_mapping_rules(pki, sw):  # noqa: F811
    """--ssl-principal-mapping-rules as Kafka's: RULE:^CN=([^,]*)$/$1/L turns CN=alice into
    User:alice; a certificate no rule matches is refused."""
    make_cert(pki, "ca", "admin", "admin")
    make_cert(pki, "ca", "nocn", "x", subj="/O=nobody")
    args = ["--ssl-certificate-file", f"{pki}/server.pem", "--ssl-key-file", f"{pki}/server.key",
            "--ssl-client-ca-file", f"{pki}/ca.pem", "--authorizer", "acl",
            "--super-users", "User:admin", "--ssl-principal-mapping-rules",
            "RULE:^CN=([^,]*)$/$1/L"]
    cls = functools.partial(ListenersBroker, more={"SSL": "SSL"})
    with conftest.running_broker(cls, "kelp-mtls-rules-", args, seaweed=sw) as b:
        ssl = f"127.0.0.1:{b.ports['SSL']}"
        admin, alice = tls_conf(ssl, pki, cert="admin"), tls_conf(ssl, pki, cert="client")
        t = f"rules-{uuid.uuid4().hex[:6]}"
        a = AdminClient(admin)
        a.create_topics([NewTopic(t, 1, 1)])[t].result(30)
        binding = AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice",
                             "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        a.create_acls([binding])[binding].result(15)
        assert produce(alice, t) == [0] * 5
        assert cannot_connect(tls_conf(ssl, pki, cert="nocn"))
        assert b.alive()
