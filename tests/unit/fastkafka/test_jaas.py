"""sasl.jaas.config: the parser (grammar, escapes, errors that never echo a value), the producer
settings it fills (PLAIN / SCRAM credentials checked against sasl.mechanism), Kafka's unsecured
OAUTHBEARER login (an unsigned JWS) and the client-credentials flow against a local token endpoint
(HTTP Basic authentication, the token cached until it nears its expiry). No secret reaches a repr,
an error or a log line."""
from __future__ import annotations

import base64
import json
import logging
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, SaslAuthenticationError
from fastkafka._net.jaas import (OAUTHBEARER_MODULE, PLAIN_MODULE, SCRAM_MODULE,
                                 ClientCredentialsProvider, parse_jaas, unsecured_token_provider)
from fastkafka._net.sasl import OAuthBearer, TokenSource

SECRET = "s3cr3t-Pa55=;\"word"
SECRET_Q = SECRET.replace("\\", "\\\\").replace('"', '\\"')


def _b64json(part: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


# ------------------------------------------------------------------------------------- parser
def test_parses_the_three_modules_of_kafka_clients():
    e = parse_jaas(f'{PLAIN_MODULE} required username="u" password="p";')
    assert (e.module, e.flag, e.options) == (PLAIN_MODULE, "required", {"username": "u", "password": "p"})
    e = parse_jaas(f'  {SCRAM_MODULE}   REQUIRED\n  username="bob"\tpassword="x y" ; ')
    assert e.flag == "required" and e.options == {"username": "bob", "password": "x y"}
    e = parse_jaas(f"{OAUTHBEARER_MODULE} optional unsecuredLoginStringClaim_sub=alice "
                   f"unsecuredLoginLifetimeSeconds=60;")
    assert e.options == {"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginLifetimeSeconds": "60"}


def test_quoted_values_take_backslash_escapes_and_any_character():
    e = parse_jaas(f'{PLAIN_MODULE} requisite username="a\\\\b" password="{SECRET_Q}";')
    assert e.options == {"username": "a\\b", "password": SECRET}
    assert parse_jaas(f'{PLAIN_MODULE} sufficient username="";').options == {"username": ""}


@pytest.mark.parametrize("line, what", [
    ("", "no login module"),
    (f'{PLAIN_MODULE} username="u" password="{SECRET_Q}";', "control flag"),
    (f'{PLAIN_MODULE} required username="u" password="{SECRET_Q}"', "missing ';'"),
    (f'{PLAIN_MODULE} required username="u" password="{SECRET_Q};', "not closed"),
    (f'{PLAIN_MODULE} required username="u" password="{SECRET_Q}" password="{SECRET_Q}";', "twice"),
    (f'{PLAIN_MODULE} required username="u" {SECRET.split("=")[0]};', "no '=value'"),
    (f'{PLAIN_MODULE} required username="u" password="{SECRET_Q}"; {SECRET_Q}', "after ';'"),
    (f'{PLAIN_MODULE} required password= ;', "empty value"),
    (f'not/a.class required password="{SECRET_Q}";', "Java class"),
])
def test_malformed_lines_are_config_errors_that_do_not_echo_the_line(line, what):
    with pytest.raises(ConfigError, match="sasl.jaas.config") as ei:
        parse_jaas(line)
    text = str(ei.value) + repr(ei.value)
    assert what in text
    for piece in (SECRET, SECRET.split("=")[0], "s3cr3t"):
        assert piece not in text


def test_entry_repr_has_keys_not_values():
    e = parse_jaas(f'{PLAIN_MODULE} required username="u" password="{SECRET_Q}";')
    assert SECRET not in repr(e) and "password" in repr(e)


# ---------------------------------------------------------------------------- producer settings
def sasl_cfg(mech, jaas, **kw):
    return ProducerConfig({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_PLAINTEXT",
                           "sasl.mechanism": mech, "sasl.jaas.config": jaas, **kw})


@pytest.mark.parametrize("mech, module", [("PLAIN", PLAIN_MODULE), ("SCRAM-SHA-256", SCRAM_MODULE),
                                          ("SCRAM-SHA-512", SCRAM_MODULE)])
def test_plain_and_scram_modules_give_the_credentials(mech, module):
    c = sasl_cfg(mech, f'{module} required username="alice" password="{SECRET_Q}";')
    assert (c.sasl_plain_username, c.sasl_plain_password) == ("alice", SECRET)
    shown = repr(c) + repr(c.as_dict())
    assert SECRET not in shown and "s3cr3t" not in shown and "***" in shown


@pytest.mark.parametrize("mech, module, msg", [
    ("SCRAM-SHA-256", PLAIN_MODULE, "PlainLoginModule, which is for PLAIN, but sasl.mechanism is SCRAM-SHA-256"),
    ("PLAIN", SCRAM_MODULE, "for SCRAM-SHA-256 or SCRAM-SHA-512, but sasl.mechanism is PLAIN"),
    ("OAUTHBEARER", PLAIN_MODULE, "sasl.mechanism is OAUTHBEARER"),
    ("PLAIN", OAUTHBEARER_MODULE, "for OAUTHBEARER"),
])
def test_module_must_fit_the_mechanism(mech, module, msg):
    with pytest.raises(ConfigError, match=msg) as ei:
        sasl_cfg(mech, f'{module} required username="u" password="{SECRET_Q}";')
    assert SECRET not in str(ei.value)


def test_conflicts_and_missing_pieces_are_named():
    line = f'{PLAIN_MODULE} required username="u" password="{SECRET_Q}";'
    with pytest.raises(ConfigError, match="sasl_plain_password and sasl.jaas.config are both given"):
        sasl_cfg("PLAIN", line, **{"sasl.password": "other"})
    with pytest.raises(ConfigError, match="set sasl.mechanism to PLAIN"):
        ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                        "sasl.jaas.config": line, "ssl_check_hostname": False})
    with pytest.raises(ConfigError, match="needs password"):
        sasl_cfg("PLAIN", f'{PLAIN_MODULE} required username="u";')
    with pytest.raises(ConfigError, match="not user_alice"):
        sasl_cfg("PLAIN", f'{PLAIN_MODULE} required username="u" password="p" user_alice="x";')
    with pytest.raises(ConfigError, match="is not supported"):
        sasl_cfg("PLAIN", 'com.example.MyLoginModule required username="u" password="p";')
    with pytest.raises(ConfigError, match="security_protocol is PLAINTEXT"):
        ProducerConfig({"bootstrap.servers": "h:1", "sasl.jaas.config": line})


def test_jaas_config_is_a_secret_setting_in_every_spelling():
    line = f'{PLAIN_MODULE} required username="u" password="{SECRET_Q}";'
    for key in ("sasl.jaas.config", "sasl_jaas_config"):
        c = ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", key: line})
        assert SECRET not in repr(c) and SECRET not in str(c.as_dict())


# ------------------------------------------------------------------------- OAUTHBEARER unsecured
def test_unsecured_login_makes_kafkas_unsigned_jws():
    clock = [1_700_000_000.0]
    provide = unsecured_token_provider(
        {"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginNumberClaim_level": "3",
         "unsecuredLoginListClaim_scope": ",read,write", "unsecuredLoginLifetimeSeconds": "120"},
        clock=lambda: clock[0])
    token, expiry = provide()
    header, payload, signature = token.split(".")
    assert _b64json(header) == {"alg": "none"} and signature == ""
    claims = _b64json(payload)
    assert claims["sub"] == "alice" and claims["level"] == 3 and claims["scope"] == ["read", "write"]
    assert claims["iat"] == clock[0] and claims["exp"] == clock[0] + 120 == expiry


def test_unsecured_login_needs_the_principal_and_known_options():
    with pytest.raises(ConfigError, match='unsecuredLoginStringClaim_sub="<user>"'):
        unsecured_token_provider({})
    with pytest.raises(ConfigError, match="unsecuredLoginStringClaim_user"):
        unsecured_token_provider({"unsecuredLoginPrincipalClaimName": "user",
                                  "unsecuredLoginStringClaim_sub": "x"})
    with pytest.raises(ConfigError, match="not one of Kafka's unsecured"):
        unsecured_token_provider({"unsecuredLoginStringClaim_sub": "x", "foo": "y"})
    with pytest.raises(ConfigError, match="extensions are not supported"):
        unsecured_token_provider({"unsecuredLoginStringClaim_sub": "x",
                                  "unsecuredLoginExtension_traceId": "1"})


def test_oauthbearer_jaas_in_the_producer_config_gives_a_token_provider():
    c = sasl_cfg("OAUTHBEARER", f'{OAUTHBEARER_MODULE} required unsecuredLoginStringClaim_sub="dave";')
    token, _ = c.sasl_oauth_token_provider()
    assert _b64json(token.split(".")[1])["sub"] == "dave"
    first = OAuthBearer(TokenSource(c.sasl_oauth_token_provider)).first()
    assert first.startswith(b"n,,\x01auth=Bearer ey") and first.endswith(b"\x01\x01")
    with pytest.raises(ConfigError, match="both given"):
        sasl_cfg("OAUTHBEARER", f"{OAUTHBEARER_MODULE} required unsecuredLoginStringClaim_sub=d;",
                 sasl_oauth_token_provider=lambda: ("t", 0))
    with pytest.raises(ConfigError, match="set sasl.oauthbearer.token.endpoint.url"):
        sasl_cfg("OAUTHBEARER", f'{OAUTHBEARER_MODULE} required clientId="c" clientSecret="{SECRET_Q}";')


# -------------------------------------------------------------------- client-credentials flow
class TokenEndpoint:
    """A local OAuth token endpoint: checks Basic authentication and the form, counts requests."""

    def __init__(self, client_id="fastkafka app", secret=SECRET, expires_in=300):
        self.requests = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                form = dict(urllib.parse.parse_qsl(body.decode()))
                auth = self.headers.get("Authorization", "")
                endpoint.requests.append((auth, form))
                expected = "Basic " + base64.b64encode(
                    (urllib.parse.quote(client_id, safe="") + ":"
                     + urllib.parse.quote(secret, safe="")).encode()).decode()
                if auth != expected or form.get("grant_type") != "client_credentials":
                    self.send_response(401)
                    self.end_headers()
                    return
                token = "h.p%d.s" % len(endpoint.requests)
                data = json.dumps({"access_token": token, "token_type": "bearer",
                                   "expires_in": expires_in}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/oauth2/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    e = TokenEndpoint()
    yield e
    e.close()


def test_client_credentials_fetch_and_cache(endpoint, caplog):
    caplog.set_level(logging.DEBUG)
    c = sasl_cfg("OAUTHBEARER",
                 f'{OAUTHBEARER_MODULE} required clientId="fastkafka app" clientSecret="{SECRET_Q}" '
                 f'scope="kafka.write";',
                 **{"sasl.oauthbearer.token.endpoint.url": endpoint.url,
                    "sasl.login.callback.handler.class":
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"})
    now = [1000.0]
    c.sasl_oauth_token_provider.clock = lambda: now[0]
    source = TokenSource(c.sasl_oauth_token_provider, clock=lambda: now[0])
    assert source.token() == "h.p1.s"
    assert source.token() == "h.p1.s"           # cached: one request
    assert len(endpoint.requests) == 1
    assert endpoint.requests[0][1] == {"grant_type": "client_credentials", "scope": "kafka.write"}
    now[0] += 200                               # before the refresh margin: still cached
    assert source.token() == "h.p1.s" and len(endpoint.requests) == 1
    now[0] += 100                               # expired: fetched again
    assert source.token() == "h.p2.s" and len(endpoint.requests) == 2
    shown = repr(c) + repr(c.as_dict()) + repr(c.sasl_oauth_token_provider) + caplog.text
    assert SECRET not in shown and "s3cr3t" not in shown


def test_wrong_client_secret_is_a_typed_error_without_the_secret(endpoint):
    provider = ClientCredentialsProvider(endpoint.url, "fastkafka app", "wrong-" + SECRET)
    with pytest.raises(SaslAuthenticationError, match="HTTP 401") as ei:
        provider()
    assert "wrong-" not in str(ei.value) and "s3cr3t" not in str(ei.value)
    with pytest.raises(ConfigError, match="http"):
        ClientCredentialsProvider("ftp://x/token", "c", SECRET)


def test_unreachable_endpoint_is_a_typed_error():
    provider = ClientCredentialsProvider("http://127.0.0.1:9/token", "c", SECRET, timeout_s=2)
    with pytest.raises(SaslAuthenticationError, match="cannot be reached") as ei:
        provider()
    assert "s3cr3t" not in str(ei.value)
