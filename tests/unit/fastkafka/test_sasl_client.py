"""SASL: settings checks, secrets kept out of every text, and the mechanisms' messages (SCRAM against
the RFC 7677 example and against an independent server implementation, scramp)."""
from __future__ import annotations

import base64
import logging
import pickle

import pytest

from fastkafka import Producer
from fastkafka.admin import Admin
from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, KafkaError, SaslAuthenticationError
from fastkafka._net.sasl import OAuthBearer, Plain, Scram, TokenSource

SECRET = "s3cr3t-Pa55"


def sasl_cfg(**kw):
    base = {"bootstrap_servers": "127.0.0.1:9", "security_protocol": "SASL_PLAINTEXT"}
    base.update(kw)
    return ProducerConfig(**base)


# --------------------------------------------------------------------------------------- config
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
def test_user_password_mechanisms(mech):
    c = sasl_cfg(sasl_mechanism=mech, sasl_plain_username="alice", sasl_plain_password=SECRET)
    assert c.sasl_mechanism == mech.upper() and c.security_protocol == "SASL_PLAINTEXT"


def test_dotted_aliases():
    c = ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "sasl_plaintext",
                        "sasl.mechanisms": "PLAIN", "sasl.username": "alice", "sasl.password": SECRET})
    assert (c.sasl_mechanism, c.sasl_plain_username, c.sasl_plain_password) == ("PLAIN", "alice", SECRET)
    c = ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "OAUTHBEARER",
                        "sasl.oauth.token.provider": lambda: ("t", 2e9)})
    assert c.sasl_mechanism == "OAUTHBEARER"


@pytest.mark.parametrize("kw,names", [
    ({}, ["sasl_mechanism"]),
    ({"sasl_mechanism": "GSSAPI", "sasl_plain_username": "a", "sasl_plain_password": SECRET},
     ["sasl_plain_username", "sasl_plain_password", "GSSAPI"]),
    ({"sasl_mechanism": "GSSAPI", "sasl_kerberos_keytab": __file__}, ["sasl_kerberos_principal"]),
    ({"sasl_mechanism": "GSSAPI", "sasl_kerberos_keytab": "/no/such.keytab",
      "sasl_kerberos_principal": "alice"}, ["sasl_kerberos_keytab"]),
    ({"sasl_mechanism": "PLAIN", "sasl_plain_username": "a", "sasl_plain_password": SECRET,
      "sasl_kerberos_principal": "alice"}, ["sasl_kerberos_principal", "GSSAPI"]),
    ({"sasl_mechanism": "PLAIN"}, ["sasl_plain_username", "sasl_plain_password"]),
    ({"sasl_mechanism": "PLAIN", "sasl_plain_username": "a"}, ["sasl_plain_password"]),
    ({"sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_password": SECRET}, ["sasl_plain_username"]),
    ({"sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "", "sasl_plain_password": SECRET},
     ["sasl_plain_username"]),
    ({"sasl_mechanism": "PLAIN", "sasl_plain_username": "a", "sasl_plain_password": SECRET + "\0"},
     ["sasl_plain_password"]),
    ({"sasl_mechanism": "OAUTHBEARER"}, ["sasl_oauth_token_provider"]),
    ({"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": lambda: ("t", 1),
      "sasl_plain_password": SECRET}, ["sasl_plain_password"]),
    ({"sasl_mechanism": "PLAIN", "sasl_plain_username": "a", "sasl_plain_password": SECRET,
      "sasl_oauth_token_provider": lambda: ("t", 1)}, ["sasl_oauth_token_provider"]),
    ({"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": "not callable"},
     ["sasl_oauth_token_provider"]),
    ({"sasl_mechanism": "PLAIN", "sasl_plain_username": "a", "sasl_plain_password": 12345678},
     ["sasl_plain_password"]),
])
def test_inconsistent_settings_name_the_setting_never_the_secret(kw, names):
    with pytest.raises(ConfigError) as exc:
        sasl_cfg(**kw)
    text = str(exc.value)
    for name in names:
        assert name in text
    assert SECRET not in text and "12345678" not in text


def test_sasl_settings_need_a_sasl_security_protocol():
    with pytest.raises(ConfigError, match="sasl_mechanism, sasl_plain_password.*security_protocol "
                                          "is PLAINTEXT") as exc:
        ProducerConfig(bootstrap_servers="h:1", sasl_mechanism="PLAIN", sasl_plain_password=SECRET)
    assert SECRET not in str(exc.value)


def test_secret_never_in_repr_as_dict_or_pickled_errors():
    c = sasl_cfg(sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice", sasl_plain_password=SECRET)
    assert SECRET not in repr(c) and SECRET not in str(c)
    assert SECRET not in repr(c.as_dict()) and c.as_dict()["sasl_plain_password"] == "***"
    assert "alice" in repr(c)   # the user name is no secret
    for mech in (Plain("alice", SECRET), Scram("SCRAM-SHA-256", "alice", SECRET)):
        assert SECRET not in repr(mech)


def test_admin_takes_the_sasl_settings():
    a = Admin(bootstrap_servers="127.0.0.1:9", security_protocol="SASL_PLAINTEXT",
              sasl_mechanism="PLAIN", sasl_plain_username="a", sasl_plain_password=SECRET)
    try:
        assert a._client.sasl is not None and a._client.sasl.mechanism == "PLAIN"
    finally:
        a.close()


# ----------------------------------------------------------------------------------- mechanisms
def test_plain_message():
    assert Plain("alice", "pw").first() == b"\0alice\0pw"
    assert Plain("al", "p\u00e9").first() == b"\0al\0p\xc3\xa9"


def test_scram_sha256_rfc7677_example():
    """RFC 7677 section 3: user "user", password "pencil", the client nonce given."""
    c = Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.receive(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                      b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert c.receive(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None


def _scramp_exchange(mech, user, password, server_password, tamper=None):
    from scramp import ScramMechanism

    m = ScramMechanism(mech)
    info = m.make_auth_info(server_password, iteration_count=4096)
    server = m.make_server(lambda name: info)
    client = Scram(mech, user, password)
    server.set_client_first(client.first().decode())
    final = client.receive(server.get_server_first().encode())
    server.set_client_final(final.decode())     # scramp checks the client's proof
    server_final = server.get_server_final()
    if tamper is not None:
        server_final = tamper(server_final)
    return client.receive(server_final.encode())


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_an_independent_server(mech):
    assert _scramp_exchange(mech, "bob", "bob-secret", "bob-secret") is None
    assert _scramp_exchange(mech, "b=o,b", "p\u00e4ss", "p\u00e4ss") is None   # saslname escaping


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_is_refused_by_the_server(mech):
    from scramp import ScramException

    with pytest.raises(ScramException):
        _scramp_exchange(mech, "bob", "not-the-password", "bob-secret")


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_signature_is_verified(mech):
    def flip(server_final):
        sig = bytearray(base64.b64decode(server_final[2:]))
        sig[0] ^= 1
        return "v=" + base64.b64encode(bytes(sig)).decode()

    with pytest.raises(SaslAuthenticationError, match="signature is wrong") as exc:
        _scramp_exchange(mech, "bob", "bob-secret", "bob-secret", tamper=flip)
    assert exc.value.retriable is False
    with pytest.raises(SaslAuthenticationError, match="signature"):
        _scramp_exchange(mech, "bob", "bob-secret", "bob-secret", tamper=lambda s: "v=")


def test_scram_refuses_bad_server_first_messages():
    for bad in (b"r=othernonce,s=QUJD,i=4096", b"s=QUJD,i=4096", b"r=%s,s=QUJD,i=10",
                b"r=%s,s=QUJD,i=999999999", b"r=%s,s=!!,i=4096", b"e=unknown-user", b"\xff"):
        c = Scram("SCRAM-SHA-256", "u", SECRET, nonce="abc")
        c.first()
        with pytest.raises(SaslAuthenticationError) as exc:
            c.receive(bad.replace(b"%s", b"abcdef"))
        assert SECRET not in str(exc.value)


def test_oauthbearer_initial_response_and_token_refresh():
    now = [1000.0]
    calls = []

    def provider():
        calls.append(now[0])
        return f"tok{len(calls)}", now[0] + 100

    src = TokenSource(provider, clock=lambda: now[0])
    m = OAuthBearer(src)
    assert m.first() == b"n,,\x01auth=Bearer tok1\x01\x01"
    assert m.receive(b"") is None
    now[0] += 50
    assert OAuthBearer(src).first() == b"n,,\x01auth=Bearer tok1\x01\x01"   # cached
    now[0] += 31                    # within 20 % of the lifetime of its expiry: a new token
    assert OAuthBearer(src).first() == b"n,,\x01auth=Bearer tok2\x01\x01"
    assert len(calls) == 2
    # an error challenge from the server is answered with %x01 (RFC 7628)
    assert OAuthBearer(src).receive(b'{"status":"invalid_token"}') == b"\x01"


@pytest.mark.parametrize("provider,match", [
    (lambda: 1 / 0, "raised ZeroDivisionError"),
    (lambda: "just-a-token", "must return"),
    (lambda: ("", 2e9), "empty or malformed"),
    (lambda: ("t\u00f6ken", 2e9), "empty or malformed"),
    (lambda: ("tok", 5), "expired"),
])
def test_oauthbearer_bad_provider(provider, match):
    with pytest.raises(SaslAuthenticationError, match=match):
        OAuthBearer(TokenSource(provider)).first()


def test_error_pickles_with_its_attributes():
    e = SaslAuthenticationError("x", node=1, host="h", port=2, mechanism="PLAIN", broker_code=58)
    back = pickle.loads(pickle.dumps(e))
    assert isinstance(back, KafkaError) and back.retriable is False
    assert (back.node, back.host, back.port, back.mechanism, back.broker_code) == (1, "h", 2, "PLAIN", 58)


def test_producer_repr_and_logs_do_not_show_the_password(caplog):
    caplog.set_level(logging.DEBUG, logger="fastkafka")
    p = Producer(bootstrap_servers="127.0.0.1:9", security_protocol="SASL_PLAINTEXT",
                 sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password=SECRET,
                 max_block_ms=300)
    try:
        assert SECRET not in repr(p) and SECRET not in repr(p.config)
        assert SECRET not in repr(p.metrics())
    finally:
        p.close(1)
    assert SECRET not in caplog.text


# ----------------------------------------------------------------------------------- Spark sink
SINK_SASL = {"kafka.bootstrap.servers": "127.0.0.1:9", "kafka.security.protocol": "SASL_PLAINTEXT",
             "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.username": "bob",
             "kafka.sasl.password": SECRET, "topic": "t"}


def test_spark_sink_options_pass_sasl_through_and_hide_the_password(tmp_path):
    from spark_sink.datasource import summarize
    from spark_sink.options import settings_from_options

    s = settings_from_options(SINK_SASL)
    kw = s.producer_kwargs()
    assert kw["sasl_plain_password"] == SECRET and kw["sasl_mechanism"] == "SCRAM-SHA-256"
    assert ProducerConfig(kw).sasl_plain_username == "bob"     # what each executor builds
    assert SECRET not in repr(s) and SECRET not in str(s)
    s = s.__class__(**{**s.__dict__, "summary_path": str(tmp_path / "summary.jsonl")})
    summary = summarize(s, [])
    assert SECRET not in repr(summary)
    assert SECRET not in (tmp_path / "summary.jsonl").read_text()


@pytest.mark.parametrize("change", [
    {"kafka.sasl.username": None},                      # a missing user name
    {"kafka.sasl.mechanism": "GSSAPI"},                 # a mechanism that takes no password
    {"kafka.security.protocol": "PLAINTEXT"},           # sasl settings without SASL
])
def test_spark_sink_sasl_errors_name_the_setting_not_the_password(change):
    from spark_sink.options import settings_from_options

    opts = {k: v for k, v in {**SINK_SASL, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as exc:
        settings_from_options(opts)
    assert SECRET not in str(exc.value)
    assert "sasl" in str(exc.value)
