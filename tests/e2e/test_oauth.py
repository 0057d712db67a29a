"""SASL OAUTHBEARER (KIP-255, KIP-768): Kelp checks JWTs against a JSON Web Key Set file
(--sasl-oauthbearer-jwks-file) with an expected issuer and audience. The test is its own
identity provider: openssl makes an RSA key, the JWKS holds its public half, and tokens are
signed RS256 with it (never a committed key). Real clients sign in with such tokens:
confluent-kafka (oauth_cb), Apache Kafka's Java client (its OAuthBearerLoginCallbackHandler
reading the token from a file) and kafkajs (oauthBearerProvider). Expired, forged, wrongly
issued and unsigned tokens get SASL_AUTHENTICATION_FAILED worded with RFC 7628's error JSON;
a connection's authentication ends with its token; SIGHUP re-reads the key set (key rotation).

Each test starts its own Kelp; tokens store nothing, so only the local pass runs them."""

import base64
import functools
import json
import os
import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

import conftest
import kwire
from conftest import require
from test_listeners import ListenersBroker
from test_sasl import authenticate, closed, handshake, metadata, refused
from test_tls import pki, round_trip  # noqa: F401 (pki is a fixture)

pytestmark = conftest.ENGINE_NEUTRAL

ISSUER, AUDIENCE = "https://idp.kelp.test", "kelp"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """An RSA signing key made by openssl, its JWKS, and RS256 tokens signed with it."""

    def __init__(self, directory, kid):
        self.kid, self.key = kid, str(directory / f"{kid}.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                        "rsa_keygen_bits:2048", "-out", self.key], check=True, capture_output=True)
        modulus = subprocess.run(["openssl", "rsa", "-in", self.key, "-noout", "-modulus"],
                                 check=True, capture_output=True, text=True).stdout
        n = bytes.fromhex(modulus.strip().split("=", 1)[1])
        self.jwk = {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64url(n),
                    "e": "AQAB"}

    def token(self, sub="svc-orders", lifetime=3600, iss=ISSUER, aud=AUDIENCE, kid=None, **more):
        now = int(time.time())
        claims = {"sub": sub, "iat": now, "exp": now + lifetime, "iss": iss, "aud": aud,
                  "scope": "kafka", **more}
        header = {"alg": "RS256", "typ": "JWT", "kid": kid or self.kid}
        signing_input = (b64url(json.dumps(header).encode()) + "."
                         + b64url(json.dumps(claims).encode()))
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", self.key],
                             input=signing_input.encode(), check=True, capture_output=True).stdout
        return signing_input + "." + b64url(sig)


def write_jwks(path, *issuers):
    path.write_text(json.dumps({"keys": [i.jwk for i in issuers]}))


@pytest.fixture
def idp(tmp_path):
    require(shutil.which("openssl") is not None, "openssl")
    issuer = Issuer(tmp_path, "key-1")
    jwks = tmp_path / "jwks.json"
    write_jwks(jwks, issuer)
    return issuer, jwks


@pytest.fixture
def oauth_broker(pki, sw, idp, tmp_path):  # noqa: F811
    _, jwks = idp
    args = ["--ssl-certificate-file", f"{pki}/server.pem", "--ssl-key-file", f"{pki}/server.key",
            "--sasl-enabled-mechanisms", "OAUTHBEARER,SCRAM-SHA-512",
            "--sasl-oauthbearer-jwks-file", str(jwks),
            "--sasl-oauthbearer-expected-issuer", ISSUER,
            "--sasl-oauthbearer-expected-audience", f"other,{AUDIENCE}",
            "--sasl-oauthbearer-clock-skew-seconds", "0"]
    cls = functools.partial(ListenersBroker,
                            more={"SASL_SSL": "SASL_SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    with conftest.running_broker(cls, "kelp-oauth-", args, seaweed=sw) as b:
        yield b


def oauth_conf(b, pki, token, ssl=True):  # noqa: F811
    listener = "SASL_SSL" if ssl else "SASL_PLAINTEXT"
    c = {"bootstrap.servers": f"127.0.0.1:{b.ports[listener]}", "security.protocol": listener,
         "sasl.mechanisms": "OAUTHBEARER",
         "oauth_cb": lambda _config: (token, time.time() + 3600)}
    if ssl:
        c["ssl.ca.location"] = os.path.join(pki, "ca.pem")
    return c


def test_confluent_kafka_with_signed_tokens(oauth_broker, idp, pki):  # noqa: F811
    b, (issuer, _) = oauth_broker, idp
    round_trip(oauth_conf(b, pki, issuer.token()), n=60)
    round_trip(oauth_conf(b, pki, issuer.token(sub="svc-billing"), ssl=False), n=30)
    # Every way a token can be wrong: refused.
    forged = issuer.token().split(".")
    forged[1] = b64url(json.dumps({"sub": "admin", "iat": int(time.time()),
                                   "exp": int(time.time()) + 3600, "iss": ISSUER,
                                   "aud": AUDIENCE}).encode())
    unsigned = (b64url(b'{"alg":"none"}') + "."
                + b64url(json.dumps({"sub": "a", "exp": int(time.time()) + 60}).encode()) + ".")
    for bad in (issuer.token(lifetime=-5), issuer.token(iss="https://evil"),
                issuer.token(aud="someone-else"), issuer.token(kid="key-9"), ".".join(forged),
                unsigned):
        assert refused(oauth_conf(b, pki, bad)), bad
    assert b.alive()


def test_wire_exchange_and_token_expiry(oauth_broker, idp):
    """RFC 7628 on the wire: a refused token gets the error JSON, the client's %x01, then
    SASL_AUTHENTICATION_FAILED carrying that JSON; a good token's session lasts until its
    expiry (session_lifetime_ms), and the next request after it closes the connection."""
    b, (issuer, _) = oauth_broker, idp
    bs = f"127.0.0.1:{b.ports['SASL_PLAINTEXT']}"

    def first(token):
        return f"n,,\x01auth=Bearer {token}\x01\x01".encode()

    with kwire.Conn(bs) as c:
        err, mechs = handshake(c, "OAUTHBEARER")
        assert err == 0 and set(mechs) == {"OAUTHBEARER", "SCRAM-SHA-512"}
        err, _, challenge, _ = authenticate(c, first(issuer.token(lifetime=-60)))
        assert err == 0 and json.loads(challenge) == {"status": "invalid_token"}
        err, msg, _, _ = authenticate(c, b"\x01")
        assert err == 58 and "invalid_token" in msg, (err, msg)
        assert closed(c)
    with kwire.Conn(bs) as c:
        assert handshake(c, "OAUTHBEARER")[0] == 0
        err, _, _, lifetime = authenticate(c, first(issuer.token(lifetime=4)))
        assert err == 0 and 2000 < lifetime <= 4000, lifetime
        metadata(c)
        c.recv_response(3, 1)
        time.sleep(lifetime / 1000 + 0.5)
        metadata(c)
        assert closed(c)
    assert b.alive()


def test_java_client_and_kafkajs_with_signed_tokens(oauth_broker, idp, pki, tmp_path):  # noqa: F811
    b, (issuer, _) = oauth_broker, idp
    token_file = tmp_path / "token.jwt"
    token_file.write_text(issuer.token(sub="svc-java"))
    conf = tmp_path / "oauth.properties"
    conf.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.login.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
        f"sasl.oauthbearer.token.endpoint.url=file://{token_file}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        "required ;\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={os.path.join(pki, 'ca.pem')}\n")
    out = conftest.java_round_trip(
        tmp_path, f"127.0.0.1:{b.ports['SASL_SSL']}", f"oauth-java-{uuid.uuid4().hex[:6]}", 300,
        config=conf,
        jvm=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{token_file}"])
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-4000:]}"
    assert out.stdout.count(" 300") == 5, out.stdout

    node = conftest.kafkajs_dir()

    def kafkajs(token):
        topic = f"js-{uuid.uuid4().hex[:8]}"
        env = dict(os.environ, KELP_SSL_CA=os.path.join(pki, "ca.pem"),
                   KELP_SASL=f"oauthbearer::{token}")
        return subprocess.run(["node", "groupcheck.js", f"127.0.0.1:{b.ports['SASL_SSL']}",
                               topic, f"g-{topic}", "300"],
                              cwd=node, env=env, capture_output=True, text=True, timeout=90)

    out = kafkajs(issuer.token(sub="svc-js"))
    assert out.returncode == 0 and "OK 300" in out.stdout, out.stdout + out.stderr[-3000:]
    # kafkajs takes RFC 7628's error challenge for success and sends its next request, which
    # ends the connection (as Kafka does, mid-exchange): it fails either way.
    out = kafkajs(issuer.token(iss="https://evil"))
    assert out.returncode != 0 and "OK" not in out.stdout, out.stdout + out.stderr[-2000:]


def test_sighup_rotates_the_key_set(oauth_broker, idp, pki, tmp_path):  # noqa: F811
    b, (old, jwks) = oauth_broker, idp
    new = Issuer(tmp_path, "key-2")
    assert refused(oauth_conf(b, pki, new.token()))

    # Rotation: both keys for a while, then the new one only.
    write_jwks(jwks, old, new)
    b.sighup("key set reloaded")
    round_trip(oauth_conf(b, pki, new.token()), n=20)
    round_trip(oauth_conf(b, pki, old.token()), n=20)
    write_jwks(jwks, new)
    b.sighup("key set reloaded")
    assert refused(oauth_conf(b, pki, old.token()))
    # A broken file keeps the keys in use.
    jwks.write_text("{")
    b.sighup("reload failed")
    round_trip(oauth_conf(b, pki, new.token()), n=20)
    md = AdminClient(oauth_conf(b, pki, new.token())).list_topics(timeout=10)
    assert md.brokers


def test_oauth_flags_that_cannot_work_stop_the_start(tmp_path):
    (tmp_path / "empty.json").write_text('{"keys":[]}')
    for flags, says in [
        (["--sasl-enabled-mechanisms", "OAUTHBEARER"], "--sasl-oauthbearer-jwks-file"),
        (["--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-file",
          str(tmp_path / "missing.json")], "missing.json"),
        (["--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-file",
          str(tmp_path / "empty.json")], "no usable signing key"),
    ]:
        r = subprocess.run([str(conftest.KELP), "--storage", "memory", "--listen",
                            "127.0.0.1:0", "--data-dir", str(tmp_path), *flags],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and says in r.stderr + r.stdout, r.stderr[-2000:]
