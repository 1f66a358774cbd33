"""OIDC client credentials as settings (librdkafka's and the Java client's names), SASL extensions,
``token()`` providers, and the local identity provider rig (fastkafka_tools.oidc_idp) itself:
client_secret_basic and client_secret_post, discovery, signatures that verify with the published
JWKS, rotation with a grace time, failure injection. No broker: test_oidc.py runs Kafka."""
from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, SaslAuthenticationError
from fastkafka._net.jaas import ClientCredentialsProvider, TokenMethodProvider
from fastkafka._net.sasl import OAuthBearer, SaslSettings, TokenSource
from fastkafka_tools.oidc_idp import IdentityProvider

SECRET = "s3cret-Client-9"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


CLIENTS = {"app": SECRET, "we:ird id": "p@ss/word+"}


@pytest.fixture(scope="module")
def idp():
    """One provider for the settings tests (a key pair takes a while to make)."""
    with IdentityProvider(CLIENTS, lifetime_s=60) as i:
        yield i


@pytest.fixture
def fresh_idp():
    """A provider of its own, for tests that rotate keys or count requests."""
    with IdentityProvider(CLIENTS, lifetime_s=60) as i:
        yield i


def cfg(**kw) -> ProducerConfig:
    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER"}
    return ProducerConfig({**base, **kw})


def oidc(idp, **kw):
    return {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "app",
            "sasl.oauthbearer.client.secret": SECRET,
            "sasl.oauthbearer.token.endpoint.url": idp.token_url, **kw}


def claims(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def test_native_settings_fetch_a_token(idp):
    c = cfg(**oidc(idp, **{"sasl.oauthbearer.scope": "kafka.write"}))
    provider = c.sasl_oauth_token_provider
    assert isinstance(provider, ClientCredentialsProvider)
    token, expiry = provider()
    assert claims(token)["sub"] == "app" and claims(token)["scope"] == "kafka.write"
    assert abs(expiry - (time.time() + 60)) < 5
    assert idp.auth_methods[-1] == "client_secret_basic"
    assert SECRET not in repr(c) and SECRET not in repr(provider)


def test_java_client_names(idp):
    c = cfg(**{"sasl.oauthbearer.client.credentials.client.id": "app",
               "sasl.oauthbearer.client.credentials.client.secret": SECRET,
               "sasl.oauthbearer.token.endpoint.url": idp.token_url,
               "sasl.login.read.timeout.ms": 1500})
    assert c.sasl_oauth_token_provider.timeout_s == 1.5
    assert claims(c.sasl_oauth_token_provider()[0])["sub"] == "app"


def test_id_and_secret_are_url_encoded_in_basic_auth(idp):
    token, _ = ClientCredentialsProvider(idp.token_url, "we:ird id", "p@ss/word+")()
    assert claims(token)["sub"] == "we:ird id"


def test_timeout_default_follows_request_timeout(idp):
    assert cfg(**oidc(idp)).sasl_oauth_token_provider.timeout_s == 10.0
    assert cfg(**oidc(idp), request_timeout_ms=3000).sasl_oauth_token_provider.timeout_s == 3.0


@pytest.mark.parametrize("extra, match", [
    ({"sasl.oauthbearer.method": "magic"}, "must be 'default' or 'oidc'"),
    ({"sasl.oauthbearer.client.secret": None}, "needs sasl_oauthbearer_client_secret"),
    ({"sasl.oauthbearer.token.endpoint.url": None}, "needs sasl_oauthbearer_token_endpoint_url"),
    ({"sasl.oauthbearer.method": "default"}, "set it to 'oidc'"),
    ({"sasl.jaas.config": f'{LOGIN} required clientId="a" clientSecret="b";'}, "use one"),
    ({"sasl_oauth_token_provider": lambda: ("t", 2e9)}, "use one"),
    ({"sasl.oauthbearer.extensions": "a=1,auth=x"}, "'auth' is reserved"),
    ({"sasl.oauthbearer.extensions": "bad-key=1"}, "ASCII letters only"),
    ({"sasl.oauthbearer.extensions": "k"}, "has no '=value'"),
])
def test_configuration_errors_name_the_setting_never_the_secret(idp, extra, match):
    settings = {k: v for k, v in {**oidc(idp), **extra}.items() if v is not None}
    with pytest.raises(ConfigError, match=match) as e:
        cfg(**settings)
    assert SECRET not in str(e.value)


def test_client_credentials_need_oauthbearer(idp):
    with pytest.raises(ConfigError, match="sasl_mechanism is PLAIN"):
        cfg(**oidc(idp), **{"sasl.mechanism": "PLAIN", "sasl.username": "u",
                            "sasl.password": "p"})


def test_scope_beside_a_jaas_line(idp):
    c = cfg(**{"sasl.jaas.config": f'{LOGIN} required clientId="app" clientSecret="{SECRET}";',
               "sasl.oauthbearer.token.endpoint.url": idp.token_url,
               "sasl.oauthbearer.scope": "s1"})
    assert c.sasl_oauth_token_provider.scope == "s1"
    with pytest.raises(ConfigError, match="scope is given both"):
        cfg(**{"sasl.jaas.config": f'{LOGIN} required clientId="app" clientSecret="x" scope="a";',
               "sasl.oauthbearer.token.endpoint.url": idp.token_url,
               "sasl.oauthbearer.scope": "s1"})


def test_extensions_in_the_initial_response(idp):
    c = cfg(**oidc(idp, **{"sasl.oauthbearer.extensions": "traceId=t1,logicalCluster=lkc-1"}))
    first = SaslSettings(c).new_exchange().first()
    assert first.startswith(b"n,,\x01auth=Bearer ey")
    assert first.endswith(b"\x01traceId=t1\x01logicalCluster=lkc-1\x01\x01")
    jaas = cfg(**{"sasl.jaas.config": f'{LOGIN} required clientId="app" clientSecret="{SECRET}" '
                                      f'extension_poolId="p9";',
                  "sasl.oauthbearer.token.endpoint.url": idp.token_url})
    assert SaslSettings(jaas).new_exchange().first().endswith(b"\x01poolId=p9\x01\x01")
    assert OAuthBearer(TokenSource(lambda: ("tok", 2e9))).first() == b"n,,\x01auth=Bearer tok\x01\x01"


def test_token_method_providers():
    class KafkaPythonShape:
        def token(self):
            return "a.b.c"

        def extensions(self):
            return {"k": "v"}

    c = cfg(sasl_oauth_token_provider=KafkaPythonShape())
    assert isinstance(c.sasl_oauth_token_provider, TokenMethodProvider)
    token, expiry = c.sasl_oauth_token_provider()
    assert token == "a.b.c" and 290 < expiry - time.time() <= 300    # not a JWT: 5 minutes
    assert SaslSettings(c).new_exchange().first().endswith(b"\x01k=v\x01\x01")

    jwt = "e30." + base64.urlsafe_b64encode(b'{"exp": 2000000000}').decode().rstrip("=") + ".sig"

    class WithJwt:
        def token(self):
            return jwt

    assert TokenMethodProvider(WithJwt())() == (jwt, 2e9)

    class AsyncShape:
        async def token(self):
            return "x"

    with pytest.raises(ConfigError, match="coroutine function"):
        cfg(sasl_oauth_token_provider=AsyncShape())


def test_a_failing_endpoint_keeps_its_message(idp):
    idp.fail_next("/token", 503)
    source = TokenSource(cfg(**oidc(idp)).sasl_oauth_token_provider)
    with pytest.raises(SaslAuthenticationError, match=r"token endpoint .*/token answered HTTP 503"):
        source.token()


def test_slow_endpoint_is_cut_by_the_timeout(fresh_idp):
    idp = fresh_idp
    idp.delay_s = 3
    provider = cfg(**oidc(idp, **{"sasl.login.read.timeout.ms": 300})).sasl_oauth_token_provider
    t0 = time.monotonic()
    with pytest.raises(SaslAuthenticationError, match="cannot be reached"):
        provider()
    assert time.monotonic() - t0 < 2


# --------------------------------------------------------------------------- the rig itself
def _post(url, form, headers=None):
    req = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST",
                                 headers=headers or {})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def _verify(idp, token: str) -> None:
    """Check the signature with the JWKS the identity provider publishes (RFC 7515/7518)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    def num(text):
        return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")

    head, body, sig = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    with urllib.request.urlopen(idp.jwks_url, timeout=5) as r:
        keys = {k["kid"]: k for k in json.loads(r.read())["keys"]}
    jwk = keys[header["kid"]]
    signature = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    data = f"{head}.{body}".encode()
    if jwk["kty"] == "RSA":
        rsa.RSAPublicNumbers(num(jwk["e"]), num(jwk["n"])).public_key().verify(
            signature, data, padding.PKCS1v15(), hashes.SHA256())
    else:
        public = ec.EllipticCurvePublicNumbers(num(jwk["x"]), num(jwk["y"]), ec.SECP256R1())
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                   int.from_bytes(signature[32:], "big"))
        public.public_key().verify(der, data, ec.ECDSA(hashes.SHA256()))


def test_rig_client_secret_post_discovery_and_signatures(fresh_idp):
    idp = fresh_idp
    with urllib.request.urlopen(idp.discovery_url, timeout=5) as r:
        discovery = json.loads(r.read())
    assert discovery["token_endpoint"] == idp.token_url and discovery["jwks_uri"] == idp.jwks_url
    answer = _post(idp.token_url, {"grant_type": "client_credentials", "client_id": "app",
                                   "client_secret": SECRET, "scope": "a b"})
    assert idp.auth_methods == ["client_secret_post"] and answer["expires_in"] == 60
    c = claims(answer["access_token"])
    assert (c["iss"], c["aud"], c["sub"], c["scope"]) == (idp.url, "kafka", "app", "a b")
    _verify(idp, answer["access_token"])
    es = idp.rotate("ES256", grace_s=0.5)
    token = idp.mint()
    _verify(idp, token)
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["kid"] == es.kid
    assert len(idp.jwks()["keys"]) == 2
    time.sleep(0.6)
    assert [k["kid"] for k in idp.jwks()["keys"]] == [es.kid]    # the old key left the JWKS


def test_rig_failure_injection(fresh_idp):
    idp = fresh_idp
    form = {"grant_type": "client_credentials", "client_id": "app", "client_secret": SECRET}
    idp.fail_next("/token", 500)
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(idp.token_url, form)
    assert e.value.code == 500
    assert _post(idp.token_url, form)["access_token"]
    idp.refuse_client("app")
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(idp.token_url, form)
    assert e.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(idp.token_url, {**form, "client_id": "we:ird id"})
    assert e.value.code == 401                    # wrong secret
    assert idp.count("/token") == 4 and idp.tokens_issued == 1


def test_spark_options_oidc_and_the_secret_hidden(idp):
    from spark_sink.options import settings_from_options

    settings = settings_from_options({
        "topic": "t", "kafka.bootstrap.servers": "127.0.0.1:1",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.oauthbearer.method": "oidc", "kafka.sasl.oauthbearer.client.id": "app",
        "kafka.sasl.oauthbearer.client.secret": SECRET,
        "kafka.sasl.oauthbearer.token.endpoint.url": idp.token_url})
    assert SECRET not in repr(settings)
    c = ProducerConfig(settings.producer_kwargs())
    assert claims(c.sasl_oauth_token_provider()[0])["sub"] == "app"
