"""OIDC with signed tokens on Apache Kafka: the broker validates every token against the local
identity provider's JWKS (``OAuthBearerValidatorCallbackHandler``: signature, ``kid``, expected
audience and issuer, expiry), and the producer gets its tokens by client credentials (native
settings, librdkafka's names, the Java client's JAAS line) or from a callable / ``token()`` object.
Every record written is read back by confluent-kafka logging in with OIDC itself (librdkafka's
``sasl.oauthbearer.method=oidc``) at the same identity provider.

One module-scoped Kafka node (one JVM) with three OAUTHBEARER listeners: OIDC (SASL_PLAINTEXT),
OIDC_REAUTH (the same, connections.max.reauth.ms=3000: re-authentication while records flow) and
OIDC_SSL (SASL_SSL). The broker refreshes the JWKS every second, so key rotation is quick.
"""
from __future__ import annotations

import base64
import json
import logging
import time

import pytest

from fastkafka import Producer
from fastkafka.errors import ConfigError

from brokers import read_back, unique_name
from oidc_rig import OIDC_CLIENTS, oidc_idp  # noqa: F401 (fixture)
from sasl_checks import assert_refused_fast

pytestmark = pytest.mark.timeout(240)

AUDIENCE = "kafka"
REAUTH_MS = 3000
JWKS_REFRESH_MS = 1000
LISTENERS = 3
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
APP, APP_SECRET = "app", OIDC_CLIENTS["app"]


def _oidc_listener(name: str, idp, reauth_ms: int | None = None) -> dict:
    p = f"listener.name.{name.lower()}."
    m = p + "oauthbearer."
    props = {
        p + "sasl.enabled.mechanisms": "OAUTHBEARER",
        m + "sasl.jaas.config": f"{LOGIN_MODULE} required;",
        m + "sasl.server.callback.handler.class": VALIDATOR,
        m + "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        m + "sasl.oauthbearer.jwks.endpoint.refresh.ms": str(JWKS_REFRESH_MS),
        m + "sasl.oauthbearer.expected.audience": AUDIENCE,
        m + "sasl.oauthbearer.expected.issuer": idp.issuer,
    }
    if reauth_ms is not None:
        props[m + "connections.max.reauth.ms"] = str(reauth_ms)
    return props


@pytest.fixture(scope="module")
def oidc_kafka(oidc_idp, pki):  # noqa: F811
    from fastkafka_tools.apachekafka import KafkaCluster
    from fastkafka_tools.tlsrig import kafka_ssl_listener

    props = {"sasl.enabled.mechanisms": "OAUTHBEARER"}
    props.update(_oidc_listener("OIDC", oidc_idp))
    props.update(_oidc_listener("OIDC_REAUTH", oidc_idp, REAUTH_MS))
    props.update(_oidc_listener("OIDC_SSL", oidc_idp))
    props.update(kafka_ssl_listener("OIDC_SSL", pki.server, pki.ca))
    kc = KafkaCluster(
        listeners={"OIDC": "SASL_PLAINTEXT", "OIDC_REAUTH": "SASL_PLAINTEXT",
                   "OIDC_SSL": "SASL_SSL"},
        properties=props,
        # Kafka 4 fetches no OAUTHBEARER URL that this system property does not list
        jvm_options=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={oidc_idp.jwks_url}"])
    kc.start()
    yield kc
    kc.stop()


def oidc_settings(idp, protocol: str = "SASL_PLAINTEXT", **extra) -> dict:
    """fastkafka's native OIDC client-credentials settings (librdkafka's names)."""
    return {"security.protocol": protocol, "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": APP,
            "sasl.oauthbearer.client.secret": APP_SECRET,
            "sasl.oauthbearer.token.endpoint.url": idp.token_url, **extra}


def reader_settings(idp) -> dict:
    """confluent-kafka (librdkafka) logging in by OIDC client credentials as the reader."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "reader",
            "sasl.oauthbearer.client.secret": OIDC_CLIENTS["reader"],
            "sasl.oauthbearer.token.endpoint.url": idp.token_url}


def wait_jwks_fetched(idp, timeout: float = 15.0) -> None:
    """Until every listener's validator fetched the JWKS again (each refreshes it on its own every
    JWKS_REFRESH_MS): two refresh periods and two fetches per listener."""
    start, t0 = idp.count("/jwks"), time.monotonic()
    while (idp.count("/jwks") < start + 2 * LISTENERS
           or time.monotonic() - t0 < 2.5 * JWKS_REFRESH_MS / 1000):
        assert time.monotonic() - t0 < timeout, "the broker does not refresh the JWKS"
        time.sleep(0.1)


def switch_key(idp, alg: str):
    """Publish a fresh ``alg`` key, let the broker fetch it, then sign with it (old keys stay)."""
    key = idp.publish_key(alg)
    wait_jwks_fetched(idp)
    idp.use_key(key)
    return key


def kid_of(token: str) -> str:
    head = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))["kid"]


def produce_and_read_back(kc, idp, listener: str, settings: dict, n: int = 200,
                          bootstrap: str | None = None, **kw) -> dict:
    topic = unique_name("oidc")
    kc.create_topic(topic, 1)
    records = [b"oidc-%d" % i for i in range(n)]
    with Producer({"bootstrap.servers": bootstrap or kc.bootstrap_for(listener), **settings,
                   "linger_ms": 5, "max_block_ms": 30000, **kw}) as p:
        futs = [p.send(topic, v, partition=0) for v in records]
        assert p.flush(60) == 0
        assert [f.get(1).offset for f in futs] == list(range(n))
        metrics = p.metrics()
    got = read_back(kc.bootstrap_for("OIDC"), topic, 1, n, timeout=60,
                    extra_config=reader_settings(idp))[0]
    assert [m.value for m in got] == records
    assert metrics["net_authentication_failures"] == 0
    return metrics


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_signed_tokens_round_trip(oidc_kafka, oidc_idp, alg, caplog):
    """Native settings; the token is signed with an ``alg`` key the broker found in the JWKS."""
    caplog.set_level(logging.DEBUG, logger="fastkafka")
    key = switch_key(oidc_idp, alg)
    issued = oidc_idp.tokens_issued
    settings = oidc_settings(oidc_idp, **{"sasl.oauthbearer.scope": "kafka.write"})
    produce_and_read_back(oidc_kafka, oidc_idp, "OIDC", settings)
    assert oidc_idp.tokens_issued > issued
    assert oidc_idp.scopes[-1] in ("kafka.write", None)    # the reader asks for none
    assert "kafka.write" in oidc_idp.scopes[issued:]
    assert "client_secret_basic" in oidc_idp.auth_methods
    assert kid_of(oidc_idp.mint()) == key.kid
    assert APP_SECRET not in caplog.text


def test_sasl_ssl_listener(oidc_kafka, oidc_idp, pki):
    produce_and_read_back(oidc_kafka, oidc_idp, "OIDC_SSL",
                          oidc_settings(oidc_idp, "SASL_SSL", **{"ssl.ca.location": pki.ca}))


@pytest.mark.parametrize("login", ["java-jaas", "callable", "token-method"])
def test_other_ways_to_log_in(oidc_kafka, oidc_idp, login):
    if login == "java-jaas":
        settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                    "sasl.login.callback.handler.class":
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                    "sasl.oauthbearer.token.endpoint.url": oidc_idp.token_url,
                    "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="{APP}" '
                                        f'clientSecret="{APP_SECRET}" scope="kafka.write" '
                                        f'extension_traceId="t42";'}
    elif login == "callable":
        settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                    "sasl_oauth_token_provider":
                        lambda: (oidc_idp.mint("callable-user"), time.time() + 60)}
    else:
        class KafkaPythonShape:            # kafka-python's AbstractTokenProvider
            def token(self):
                return oidc_idp.mint("token-method-user")

        settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                    "sasl_oauth_token_provider": KafkaPythonShape()}
    produce_and_read_back(oidc_kafka, oidc_idp, "OIDC", settings, n=50)


def _refused(kc, listener: str, settings: dict, match: str, bound_s: float = 5.0):
    return assert_refused_fast(kc, listener, settings, match, bound_s)


@pytest.mark.parametrize("bad", ["audience", "issuer", "unpublished-key", "expired"])
def test_broker_refuses_a_bad_token_typed_and_fast(oidc_kafka, oidc_idp, bad):
    if bad == "audience":
        mint = lambda: oidc_idp.mint(aud="not-kafka")                       # noqa: E731
    elif bad == "issuer":
        mint = lambda: oidc_idp.mint(iss="https://idp.example.com")          # noqa: E731
    elif bad == "unpublished-key":
        stranger = oidc_idp.new_key("RS256")
        mint = lambda: oidc_idp.mint(key=stranger)                         # noqa: E731
    else:   # beyond the broker's 30 s clock skew allowance
        now = int(time.time())
        mint = lambda: oidc_idp.mint(iat=now - 600, exp=now - 120)         # noqa: E731
    token = mint()
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                # the expiry the producer is told is in the future: the broker must refuse it
                "sasl_oauth_token_provider": lambda: (token, time.time() + 300)}
    err = _refused(oidc_kafka, "OIDC", settings, "OAUTHBEARER.*SASL_AUTHENTICATION_FAILED")
    assert err.node is not None and err.mechanism == "OAUTHBEARER"
    assert oidc_kafka.bootstrap_for("OIDC") in str(err)
    assert token not in str(err) and token.split(".")[2] not in repr(err)


def test_identity_provider_failures_are_typed_and_bounded(oidc_kafka, caplog):
    from fastkafka_tools.oidc_idp import IdentityProvider

    caplog.set_level(logging.DEBUG, logger="fastkafka")
    with IdentityProvider(OIDC_CLIENTS) as idp:
        idp.fail_next("/token", 500, count=100)
        err = _refused(oidc_kafka, "OIDC", oidc_settings(idp), "HTTP 500")
        assert idp.token_url in str(err)

    with IdentityProvider(OIDC_CLIENTS) as idp:   # slow: the producer's HTTP bound cuts it
        idp.delay_s = 5.0
        _refused(oidc_kafka, "OIDC",
                 oidc_settings(idp, **{"sasl.login.read.timeout.ms": 700}), "cannot be reached",
                 bound_s=4.0)

    with IdentityProvider(OIDC_CLIENTS) as idp:
        idp.refuse_client(APP)
        _refused(oidc_kafka, "OIDC", oidc_settings(idp), "HTTP 401")
        down = idp.token_url
    _refused(oidc_kafka, "OIDC", {**oidc_settings(idp), "sasl.oauthbearer.token.endpoint.url": down},
             "cannot be reached")
    assert APP_SECRET not in caplog.text


def test_client_secret_never_shown(oidc_idp):
    settings = oidc_settings(oidc_idp)
    with pytest.raises(ConfigError) as exc:
        Producer({"bootstrap.servers": "127.0.0.1:1", **settings,
                  "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="x" clientSecret="y";'})
    assert APP_SECRET not in str(exc.value)
    p = Producer({"bootstrap.servers": "127.0.0.1:1", **settings, "max_block_ms": 100})
    try:
        assert APP_SECRET not in repr(p) + repr(p.config) + repr(p.config.sasl_oauth_token_provider)
    finally:
        p.close(1)


def test_reauthentication_and_key_rotation_while_records_flow(oidc_kafka, oidc_idp):
    """Tokens live 6 s, sessions 3 s (connections.max.reauth.ms): the producer fetches new tokens
    and re-authenticates several times while sending for ~14 s. Midway the identity provider
    rotates from an RS256 key to an ES256 one (published first, the old one dropped from the JWKS
    6.5 s after the switch, when no token signed with it is valid any more). Every record is read
    back exactly once, in order."""
    saved = oidc_idp.lifetime_s
    oidc_idp.lifetime_s = 6
    start_key = switch_key(oidc_idp, "RS256")
    issued = oidc_idp.tokens_issued
    topic = unique_name("oidc-rotate")
    oidc_kafka.create_topic(topic, 1)
    records, futs = [], []
    try:
        with Producer({"bootstrap.servers": oidc_kafka.bootstrap_for("OIDC_REAUTH"),
                       **oidc_settings(oidc_idp), "linger_ms": 2, "max_block_ms": 30000}) as p:
            t0 = time.monotonic()
            new_key = None
            i = 0
            while time.monotonic() - t0 < 14:
                if new_key is None and time.monotonic() - t0 > 3:
                    new_key = oidc_idp.publish_key("ES256")
                    published_at, published_t = oidc_idp.count("/jwks"), time.monotonic()
                if (new_key is not None and oidc_idp.current is start_key
                        and oidc_idp.count("/jwks") >= published_at + 2 * LISTENERS
                        and time.monotonic() - published_t > 2.5 * JWKS_REFRESH_MS / 1000):
                    oidc_idp.rotate(key=new_key, grace_s=6.5)
                records.append(b"r%06d" % i)
                futs.append(p.send(topic, records[-1], partition=0))
                i += 1
                time.sleep(0.002)
            assert p.flush(60) == 0
            assert [f.get(1).offset for f in futs] == list(range(len(records)))
            m = p.metrics()
    finally:
        oidc_idp.lifetime_s = saved
    assert oidc_idp.current is new_key, "the rotation did not happen"
    assert start_key.kid not in [k["kid"] for k in oidc_idp.jwks()["keys"]], "old key not dropped"
    assert m["net_reauthentications"] >= 2, m
    assert m["net_authentication_failures"] == 0
    assert m["retries"] == 0
    assert oidc_idp.tokens_issued - issued >= 3
    got = read_back(oidc_kafka.bootstrap_for("OIDC"), topic, 1, len(records), timeout=60,
                    extra_config=reader_settings(oidc_idp))[0]
    assert [msg.value for msg in got] == records
