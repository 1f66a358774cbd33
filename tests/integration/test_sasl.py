"""SASL on Apache Kafka (the reference): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (the
broker's unsecured JWS validator), the producer and the admin client; every record written is read
back by confluent-kafka authenticating the same way (CRC checks on). Failures (wrong password,
unknown user, a mechanism the listener does not enable) are typed errors within a bounded time and
leave the I/O thread running; a 3-second session lifetime makes the producer re-authenticate while
records flow, losing and duplicating none.

One module-scoped Kafka node with three SASL listeners: SASL_PLAINTEXT (all mechanisms), REAUTH
(the same, with connections.max.reauth.ms=3000) and PLAINONLY (PLAIN only)."""
from __future__ import annotations

import base64
import json
import time

import pytest

from fastkafka import Producer
from fastkafka.admin import Admin
from fastkafka.errors import SaslAuthenticationError

from brokers import read_back, unique_name
from sasl_checks import assert_refused_fast

pytestmark = pytest.mark.timeout(300)

USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
REAUTH_MS = 3000


def _listener_props(name: str, mechanisms, reauth_ms: int | None = None) -> dict:
    p = f"listener.name.{name.lower()}."
    props = {p + "sasl.enabled.mechanisms": ",".join(mechanisms)}
    for mech in mechanisms:
        m = p + mech.lower() + "."
        if mech == "PLAIN":
            props[m + "sasl.jaas.config"] = (
                'org.apache.kafka.common.security.plain.PlainLoginModule required '
                'user_alice="alice-secret";')
        elif mech.startswith("SCRAM"):
            props[m + "sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        else:
            props[m + "sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
            props[m + "sasl.server.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                "OAuthBearerUnsecuredValidatorCallbackHandler")
        if reauth_ms is not None:
            props[m + "connections.max.reauth.ms"] = str(reauth_ms)
    return props


@pytest.fixture(scope="module")
def sasl_kafka():
    from fastkafka_tools.apachekafka import KafkaCluster

    props = {"sasl.enabled.mechanisms": ",".join(MECHANISMS)}
    props.update(_listener_props("SASL_PLAINTEXT", MECHANISMS))
    props.update(_listener_props("REAUTH", MECHANISMS, REAUTH_MS))
    props.update(_listener_props("PLAINONLY", ["PLAIN"]))
    kc = KafkaCluster(
        listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT", "REAUTH": "SASL_PLAINTEXT",
                   "PLAINONLY": "SASL_PLAINTEXT"},
        properties=props,
        scram_users=[("SCRAM-SHA-256", "bob", "bob-secret"), ("SCRAM-SHA-512", "carol", "carol-secret")])
    kc.start()
    yield kc
    kc.stop()


def unsecured_jws(sub: str, lifetime_s: float) -> tuple[str, float]:
    """An unsecured JWS (alg none) as the broker's unsecured validator takes it, and its expiry."""
    def b64(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = time.time()
    exp = now + lifetime_s
    return b64({"alg": "none"}) + "." + b64({"sub": sub, "iat": int(now) - 1, "exp": int(exp)}) + ".", exp


class TokenProvider:
    def __init__(self, lifetime_s: float = 3600):
        self.lifetime_s = lifetime_s
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return unsecured_jws("dave", self.lifetime_s)


def producer_sasl(mech: str, provider=None, password=None) -> dict:
    if mech == "OAUTHBEARER":
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                "sasl_oauth_token_provider": provider or TokenProvider()}
    user, pw = USERS[mech]
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": pw if password is None else password}


def reader_sasl(mech: str) -> dict:
    """confluent-kafka (librdkafka) settings for the same mechanism."""
    if mech == "OAUTHBEARER":
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mech,
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=reader"}
    user, pw = USERS[mech]
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mech,
            "sasl.username": user, "sasl.password": pw}


def send_and_read_back(kc, listener: str, mech: str, topic: str, n: int, provider=None, **kw):
    records = [(b"k%d" % i, b"value-%d" % i) for i in range(n)]
    with Producer({"bootstrap.servers": kc.bootstrap_for(listener), **producer_sasl(mech, provider),
                   "linger_ms": 5, "max_block_ms": 30000, **kw}) as p:
        futs = [p.send(topic, v, key=k, partition=0) for k, v in records]
        assert p.flush(60) == 0
        offsets = [f.get(1).offset for f in futs]
        metrics = p.metrics()
    assert offsets == list(range(n))
    got = read_back(kc.bootstrap_for("SASL_PLAINTEXT"), topic, 1, n, timeout=60,
                    extra_config=reader_sasl(mech))[0]
    assert [(m.key, m.value) for m in got] == records
    return metrics


@pytest.mark.parametrize("mech", MECHANISMS)
def test_each_mechanism_produces_and_admin_works(sasl_kafka, mech):
    topic = unique_name("sasl")
    provider = TokenProvider()
    with Admin({"bootstrap.servers": sasl_kafka.bootstrap_for("SASL_PLAINTEXT"),
                **producer_sasl(mech, provider)}) as admin:
        admin.create_topic(topic, 1)
    metrics = send_and_read_back(sasl_kafka, "SASL_PLAINTEXT", mech, topic, 300, provider)
    assert metrics["net_authentication_failures"] == 0
    if mech == "OAUTHBEARER":
        assert provider.calls >= 1


def _fails_fast(kc, listener, cfg, match, bound_s=15.0) -> SaslAuthenticationError:
    return assert_refused_fast(kc, listener, cfg, match, bound_s)


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password(sasl_kafka, mech):
    err = _fails_fast(sasl_kafka, "SASL_PLAINTEXT", producer_sasl(mech, password="not-it-42"),
                      "SASL_AUTHENTICATION_FAILED")
    text = str(err)
    assert mech in text and sasl_kafka.bootstrap_for("SASL_PLAINTEXT") in text
    assert "not-it-42" not in text and USERS[mech][1] not in text


def test_unknown_user(sasl_kafka):
    cfg = {**producer_sasl("SCRAM-SHA-512"), "sasl.username": "mallory"}
    _fails_fast(sasl_kafka, "SASL_PLAINTEXT", cfg, "SCRAM-SHA-512.*SASL_AUTHENTICATION_FAILED")


def test_unsupported_mechanism_names_the_enabled_ones(sasl_kafka):
    _fails_fast(sasl_kafka, "PLAINONLY", producer_sasl("SCRAM-SHA-512"),
                r"does not offer SCRAM-SHA-512 \(it offers: PLAIN\)")


def test_bad_oauth_token_is_refused(sasl_kafka):
    cfg = producer_sasl("OAUTHBEARER", provider=lambda: ("not.a.jws", time.time() + 60))
    _fails_fast(sasl_kafka, "SASL_PLAINTEXT", cfg, "OAUTHBEARER.*SASL_AUTHENTICATION_FAILED")


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "OAUTHBEARER"])
def test_reauthentication_loses_and_duplicates_nothing(sasl_kafka, mech):
    """connections.max.reauth.ms=3000: for ~9 s of steady sending the producer reconnects and
    authenticates before each session ends (Kafka would close a connection used after it). Every
    record is read back exactly once, in order."""
    topic = unique_name("reauth")
    sasl_kafka.create_topic(topic, 1)
    provider = TokenProvider(lifetime_s=5)   # the token runs out too: the provider is asked again
    records = []
    with Producer({"bootstrap.servers": sasl_kafka.bootstrap_for("REAUTH"),
                   **producer_sasl(mech, provider), "linger_ms": 2, "max_block_ms": 30000}) as p:
        futs = []
        t_end = time.monotonic() + 9
        i = 0
        while time.monotonic() < t_end:
            records.append(b"r%06d" % i)
            futs.append(p.send(topic, records[-1], partition=0))
            i += 1
            time.sleep(0.002)
        assert p.flush(60) == 0
        assert [f.get(1).offset for f in futs] == list(range(len(records)))
        m = p.metrics()
    assert m["net_reauthentications"] >= 2, m
    assert m["net_authentication_failures"] == 0
    assert m["retries"] == 0, "no request may hit an expired session and be retried"
    if mech == "OAUTHBEARER":
        assert provider.calls >= 2
    got = read_back(sasl_kafka.bootstrap_for("SASL_PLAINTEXT"), topic, 1, len(records), timeout=60,
                    extra_config=reader_sasl("PLAIN"))[0]
    assert [msg.value for msg in got] == records


# ---- sasl.jaas.config (the Java client's login line) in the producer's own config -------------
JAAS = "org.apache.kafka.common.security.{0}.{1}LoginModule required {2};"


class TokenEndpoint:
    """A local OAuth token endpoint (client credentials, HTTP Basic): hands out unsecured JWS that
    the broker's unsecured validator accepts, so the whole login path runs against Kafka."""

    def __init__(self, client_id: str, secret: str):
        import threading
        import urllib.parse
        from http.server import BaseHTTPRequestHandler, HTTPServer

        self.requests = 0
        expected = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                form = dict(urllib.parse.parse_qsl(
                    self.rfile.read(int(self.headers["Content-Length"])).decode()))
                outer.requests += 1
                if (self.headers.get("Authorization") != expected
                        or form.get("grant_type") != "client_credentials"):
                    self.send_response(401)
                    self.end_headers()
                    return
                token, _ = unsecured_jws("erin", 600)
                body = json.dumps({"access_token": token, "expires_in": 600}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("login", ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER-unsecured",
                                   "OAUTHBEARER-client-credentials"])
def test_jaas_config_logs_in_as_java_clients_do(sasl_kafka, login, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="fastkafka")
    mech = login.split("-client")[0].split("-unsecured")[0]
    endpoint = None
    extra = {}
    secret = "cc-secret-8812"
    if login == "OAUTHBEARER-unsecured":
        line = JAAS.format("oauthbearer", "OAuthBearer", 'unsecuredLoginStringClaim_sub="erin"')
    elif login == "OAUTHBEARER-client-credentials":
        endpoint = TokenEndpoint("app", secret)
        line = JAAS.format("oauthbearer", "OAuthBearer", f'clientId="app" clientSecret="{secret}"')
        extra = {"sasl.oauthbearer.token.endpoint.url": endpoint.url}
    else:
        user, secret = USERS[mech]
        line = JAAS.format(*(("plain", "Plain") if mech == "PLAIN" else ("scram", "Scram")),
                           f'username="{user}" password="{secret}"')
    topic = unique_name("jaas")
    sasl_kafka.create_topic(topic, 1)
    records = [(None, b"jaas-%d" % i) for i in range(50)]
    try:
        cfg = {"bootstrap.servers": sasl_kafka.bootstrap_for("SASL_PLAINTEXT"),
               "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
               "sasl.jaas.config": line, **extra, "linger_ms": 5, "max_block_ms": 30000}
        with Producer(cfg) as p:
            futs = [p.send(topic, v, partition=0) for _, v in records]
            assert p.flush(60) == 0
            assert [f.get(1).offset for f in futs] == list(range(50))
            assert p.metrics()["net_authentication_failures"] == 0
            shown = repr(p) + repr(p.config if hasattr(p, "config") else "")
    finally:
        if endpoint is not None:
            endpoint.close()
    if endpoint is not None:
        assert endpoint.requests == 1     # one token for the producer's connections
    got = read_back(sasl_kafka.bootstrap_for("SASL_PLAINTEXT"), topic, 1, 50, timeout=60,
                    extra_config=reader_sasl("PLAIN"))[0]
    assert [m.value for m in got] == [v for _, v in records]
    assert secret not in caplog.text and secret not in shown
