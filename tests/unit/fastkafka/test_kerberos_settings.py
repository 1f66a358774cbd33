"""GSSAPI without a KDC: the settings (ours, the Java client's, Krb5LoginModule in sasl.jaas.config,
the compat layers' names), the RFC 4752 security-layer step against a stand-in context, the
missing-package error, and the bound of the off-thread step (fastkafka._net.kerberos.GssapiJob).
The exchange with a real KDC and broker is in tests/integration/test_gssapi.py."""
from __future__ import annotations

import sys
import threading
import time

import pytest

from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, SaslAuthenticationError
from fastkafka._net.kerberos import INSTALL_HINT, Gssapi, GssapiJob
from fastkafka._net.sasl import SaslSettings

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def gss_cfg(**kw):
    return ProducerConfig(bootstrap_servers="h:1", security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="GSSAPI", **kw)


def test_our_names_and_the_java_clients(tmp_path):
    keytab = tmp_path / "alice.keytab"
    keytab.write_bytes(b"\x05\x02")
    c = gss_cfg(sasl_kerberos_principal="alice@R", sasl_kerberos_keytab=str(keytab),
                sasl_kerberos_min_time_before_relogin=5000)
    assert (c.sasl_kerberos_principal, c.sasl_kerberos_keytab) == ("alice@R", str(keytab))
    assert c.sasl_kerberos_service_name == "kafka" and c.sasl_kerberos_min_time_before_relogin == 5000
    d = ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka2",
                        "sasl.kerberos.kinit.cmd": "/usr/bin/kinit"})
    assert d.sasl_kerberos_service_name == "kafka2" and d.sasl_kerberos_keytab is None
    with pytest.raises(ConfigError, match="no command is run"):
        gss_cfg(**{"sasl.kerberos.kinit.cmd": "kinit -k -t /etc/x.keytab bob"})


def test_the_exchange_names_the_brokers_service_by_its_host():
    s = SaslSettings(gss_cfg())
    assert s.new_exchange("broker1.example").target == "kafka@broker1.example"
    s = SaslSettings(gss_cfg(sasl_kerberos_domain_name="kafka.example"))
    assert s.new_exchange("10.0.0.7").target == "kafka@kafka.example"
    s = SaslSettings(gss_cfg(sasl_kerberos_name="kafka/b1.example@R"))
    assert s.new_exchange("10.0.0.7").target == "kafka/b1.example@R"


@pytest.mark.parametrize("options,settings", [
    ('useKeyTab=true storeKey=true keyTab="{kt}" principal="alice@R"',
     {"sasl_kerberos_keytab": "{kt}", "sasl_kerberos_principal": "alice@R"}),
    ('useTicketCache=true ticketCache="FILE:/var/lib/app/cc" serviceName="kafka9"',
     {"sasl_kerberos_ticket_cache": "FILE:/var/lib/app/cc", "sasl_kerberos_service_name": "kafka9",
      "sasl_kerberos_keytab": None}),
    ("useTicketCache=true doNotPrompt=true", {"sasl_kerberos_principal": None}),
])
def test_krb5_login_module_in_sasl_jaas_config(tmp_path, options, settings):
    kt = tmp_path / "c.keytab"
    kt.write_bytes(b"\x05\x02")
    c = ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "GSSAPI",
                        "sasl.jaas.config": f"{KRB5} required {options.format(kt=kt)};"})
    for name, value in settings.items():
        assert getattr(c, name) == (value.format(kt=kt) if isinstance(value, str) else value)


@pytest.mark.parametrize("options,words", [
    ("storeKey=true", "useKeyTab=true with keyTab and principal, or useTicketCache=true"),
    ('useKeyTab=true principal="a@R"', "needs keyTab"),
    ('useKeyTab=true keyTab="/k"', "needs principal"),
    ('useTicketCache=true keyTab="/k"', "without useKeyTab=true"),
    ("useTicketCache=maybe", "useTicketCache must be true or false"),
    ("useTicketCache=true isInitiator=false", "isInitiator=false"),
    ("useTicketCache=true password=\"hunter22\"", "password"),
])
def test_krb5_login_module_mistakes_are_named(options, words):
    with pytest.raises(ConfigError) as exc:
        ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "GSSAPI", "sasl.jaas.config": f"{KRB5} required {options};"})
    assert words in str(exc.value)
    assert "hunter22" not in str(exc.value)


def test_krb5_login_module_needs_gssapi_as_the_mechanism():
    with pytest.raises(ConfigError, match="which is for GSSAPI, but sasl.mechanism is PLAIN"):
        ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN",
                        "sasl.jaas.config": f"{KRB5} required useTicketCache=true;"})


def test_without_the_gssapi_package_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gssapi", None)     # import gssapi -> ImportError
    with pytest.raises(ConfigError) as exc:
        gss_cfg()
    assert INSTALL_HINT in str(exc.value) and "libkrb5" in str(exc.value)


def test_confluent_layer_maps_kerberos_keys_with_gssapi_and_ignores_them_otherwise():
    from fastkafka.compat.confluent._config import translate

    keys = {"sasl.kerberos.service.name": "kafka", "sasl.kerberos.principal": "kafkaclient",
            "sasl.kerberos.keytab": "/k.keytab", "sasl.kerberos.min.time.before.relogin": 1000}
    out, _, ignored = translate({"bootstrap.servers": "h", "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanisms": "GSSAPI", **keys})
    assert out["sasl_kerberos_principal"] == "kafkaclient"
    assert out["sasl_kerberos_keytab"] == "/k.keytab"
    assert out["sasl_kerberos_min_time_before_relogin"] == 1000 and not ignored
    out, _, ignored = translate({"bootstrap.servers": "h", "sasl.mechanisms": "PLAIN", **keys})
    assert set(ignored) == set(keys) and not any(k.startswith("sasl_kerberos") for k in out)


def test_kafka_python_layer_passes_its_kerberos_names():
    from fastkafka.compat.kafka_python import KafkaProducer
    from fastkafka.errors import ConfigError as FkConfigError

    p = KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 6),
                      security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                      sasl_kerberos_service_name="kafka", sasl_kerberos_domain_name="b.example")
    try:
        cfg = p._producer.config
        assert (cfg.sasl_kerberos_service_name, cfg.sasl_kerberos_domain_name) == ("kafka", "b.example")
    finally:
        p.close(0)
    with pytest.raises(FkConfigError, match="sasl_kerberos_service_name.*security_protocol is "
                                            "PLAINTEXT"):
        KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 6),
                      sasl_kerberos_service_name="other")


# ---- the RFC 4752 exchange against a stand-in context -----------------------------------------
class _Wrapped:
    def __init__(self, message):
        self.message = message


class FakeContext:
    """A GSS-API context that completes after the broker's first token."""

    def __init__(self):
        self.complete = False
        self.wrapped = []

    def step(self, token=None):
        if token is None:
            return b"AP-REQ"
        assert token == b"AP-REP"
        self.complete = True
        return None

    def unwrap(self, data):
        return _Wrapped(data[len(b"sealed:"):])

    def wrap(self, data, encrypt):
        self.wrapped.append((data, encrypt))
        return _Wrapped(b"sealed:" + data)


def _exchange(offer: bytes):
    ex = Gssapi(credentials=None, target="kafka@h")
    ex._ctx = FakeContext()
    ex._state = "context"
    assert ex.receive(b"AP-REP") == b""          # context done: an empty answer, as Java's
    return ex, ex.receive(b"sealed:" + offer)


def test_security_layer_answer_is_no_layer_and_no_buffer():
    ex, answer = _exchange(bytes([0x07, 0x00, 0x10, 0x00]))   # the broker offers all three
    assert answer == b"sealed:" + bytes([1, 0, 0, 0])
    assert ex._ctx.wrapped == [(bytes([1, 0, 0, 0]), False)]
    assert ex.receive(b"") is None                 # the broker's last (empty) answer: done


@pytest.mark.parametrize("offer,words", [
    (bytes([0x04, 0, 0, 0]), "does not offer 'no security layer'"),
    (b"\x01\x00", "has 2 bytes, not 4"),
])
def test_security_layer_offers_that_cannot_be_answered(offer, words):
    with pytest.raises(SaslAuthenticationError, match=words):
        _exchange(offer)


# ---- the off-thread step and its bound --------------------------------------------------------
def _run_job(work, timeout_s):
    delivered = []
    done = threading.Event()

    def call_soon(cb):
        cb(None, None)
        done.set()

    job = GssapiJob(work, lambda r, e: delivered.append((r, e)), call_soon, timeout_s,
                    "the ticket for node 1").start()
    assert done.wait(10)
    return job, delivered


def test_job_hands_over_the_outcome_once():
    _, delivered = _run_job(lambda: b"token", 5)
    time.sleep(0.05)
    assert delivered == [(b"token", None)]
    _, delivered = _run_job(lambda: (_ for _ in ()).throw(SaslAuthenticationError("GSSAPI: no")), 5)
    assert delivered[0][0] is None and "GSSAPI: no" in str(delivered[0][1])


def test_job_bounded_when_the_work_hangs():
    release = threading.Event()
    t0 = time.monotonic()
    _, delivered = _run_job(lambda: release.wait(30) and b"late", 0.3)
    elapsed = time.monotonic() - t0
    release.set()
    time.sleep(0.05)
    assert 0.25 <= elapsed < 3
    assert len(delivered) == 1 and delivered[0][0] is None
    assert "did not complete within socket_connection_setup_timeout_ms=300" in str(delivered[0][1])
