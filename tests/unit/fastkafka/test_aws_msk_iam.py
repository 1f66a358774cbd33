"""Amazon MSK IAM (fastkafka.aws): the token equals, byte for byte, the one AWS's own signer library
(aws-msk-iam-sasl-signer-python, on botocore) makes for the same credentials and a frozen clock;
each source of the AWS credential chain is tried against local stand-ins of STS, the container
credentials endpoint and the instance metadata service; errors name the source and never a secret;
the producer sends the token in its SASL frame to the fault broker, which checks it with botocore.

The one difference between the libraries' tokens is the ``User-Agent`` query parameter (after the
signature, so not signed): each names its library. The comparison gives ours the signer's value.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import pytest

from fastkafka import Producer
from fastkafka._net.aws_iam import sign_headers
from fastkafka.aws import (AwsCredentials, CredentialChain, MSKIAMTokenProvider,
                           msk_region_from_host)
from fastkafka.config import ProducerConfig
from fastkafka.errors import AwsCredentialsError, ConfigError, SaslAuthenticationError

KEY_ID = "AKIDEXAMPLE7QX"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION = "FwoGZXIvYXdzEB0aDExample/+Session=Token"
FROZEN = dt.datetime(2025, 3, 14, 15, 9, 26)      # naive UTC, as botocore's clock gives it
FROZEN_S = FROZEN.replace(tzinfo=dt.timezone.utc).timestamp()


def signer_token(region: str, key: str, secret: str, token: str | None,
                 when: dt.datetime = FROZEN) -> tuple[str, int]:
    """aws-msk-iam-sasl-signer-python's token and expiry (ms) for fixed credentials at ``when``."""
    from botocore.credentials import Credentials
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer

    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        return getattr(signer, "__construct_auth_token")(region, Credentials(key, secret, token))


def signer_user_agent() -> str:
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer

    return getattr(signer, "__get_user_agent__")()


def decode(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1"])
@pytest.mark.parametrize("session", [None, SESSION])
def test_token_equals_the_aws_signers_byte_for_byte(region, session):
    expected, expiry_ms = signer_token(region, KEY_ID, SECRET, session)
    provider = MSKIAMTokenProvider(region, access_key_id=KEY_ID, secret_access_key=SECRET,
                                   session_token=session, user_agent=signer_user_agent(),
                                   env={}, clock=lambda: FROZEN_S)
    token, expiry = provider()
    assert token == expected
    assert expiry * 1000 == expiry_ms == (FROZEN_S + 900) * 1000
    assert "=" not in token and "+" not in token and "/" not in token   # base64url, no padding
    url = urllib.parse.urlsplit(decode(token))
    assert url.netloc == f"kafka.{region}.amazonaws.com"
    query = dict(urllib.parse.parse_qsl(url.query))
    assert query["Action"] == "kafka-cluster:Connect" and query["X-Amz-Expires"] == "900"
    assert ("X-Amz-Security-Token" in query) == (session is not None)


def test_only_the_user_agent_differs_by_default():
    expected, _ = signer_token("us-east-1", KEY_ID, SECRET, None)
    ours, _ = MSKIAMTokenProvider("us-east-1", access_key_id=KEY_ID, secret_access_key=SECRET,
                                  env={}, clock=lambda: FROZEN_S)()
    mine, theirs = decode(ours), decode(expected)
    assert mine != theirs
    assert mine.split("&User-Agent=")[0] == theirs.split("&User-Agent=")[0]
    assert mine.split("&User-Agent=")[1].startswith("fastkafka%2F")


def test_expiry_is_the_credentials_when_sooner():
    chain_creds = AwsCredentials(KEY_ID, SECRET, SESSION, FROZEN_S + 120, "test")
    provider = MSKIAMTokenProvider("us-east-1", access_key_id=KEY_ID, secret_access_key=SECRET,
                                   env={}, clock=lambda: FROZEN_S)
    provider.chain._cached = chain_creds
    provider.chain.clock = lambda: FROZEN_S - 10_000   # cached creds count as fresh
    _, expiry = provider()
    assert expiry == FROZEN_S + 120


def test_region_from_msk_host_names():
    assert msk_region_from_host("b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com") == "eu-west-1"
    assert msk_region_from_host("boot-xyz.c1.kafka-serverless.us-east-2.amazonaws.com") == "us-east-2"
    assert msk_region_from_host("b-2.x.y.c3.kafka.cn-north-1.amazonaws.com.cn") == "cn-north-1"
    assert msk_region_from_host("kafka.example.com") is None


# ------------------------------------------------------------------------ credential stand-ins
class AwsStandIn:
    """STS (AssumeRole, AssumeRoleWithWebIdentity), container credentials and IMDSv2 on one
    local HTTP server. ``requests`` logs (method, path, headers, form)."""

    def __init__(self):
        self.requests: list[tuple] = []
        self.fail: dict[str, int] = {}
        self.expiration = "2099-01-01T00:00:00Z"
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status, body: bytes, ctype="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                path = self.path
                stand_in.requests.append((method, path, {k.lower(): v for k, v in self.headers.items()}, form))
                if path in stand_in.fail:
                    return self._reply(stand_in.fail[path], b'{"Code":"Denied"}')
                creds = {"AccessKeyId": "ASIA" + path.strip("/").replace("/", "")[-6:].upper(),
                         "SecretAccessKey": "secret-from-" + path, "Token": "token-from-" + path,
                         "Expiration": stand_in.expiration}
                if method == "PUT" and path == "/latest/api/token":
                    return self._reply(200, b"imds-session-token", "text/plain")
                if path.startswith("/latest/meta-data/iam/security-credentials/"):
                    if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
                        return self._reply(401, b"")
                    role = path.rsplit("/", 1)[1]
                    if not role:
                        return self._reply(200, b"instance-role", "text/plain")
                    return self._reply(200, json.dumps({"Code": "Success", **creds}).encode())
                if path == "/container-creds":
                    if self.headers.get("Authorization") != "container-auth-token":
                        return self._reply(403, b'{"code":"AccessDenied"}')
                    return self._reply(200, json.dumps(creds).encode())
                if path == "/" and form.get("Action") in ("AssumeRole", "AssumeRoleWithWebIdentity"):
                    action = form["Action"]
                    xml = (f'<{action}Response xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                           f"<{action}Result><Credentials><AccessKeyId>ASIASTS{action[-3:].upper()}"
                           f"</AccessKeyId><SecretAccessKey>sts-secret</SecretAccessKey>"
                           f"<SessionToken>sts-session</SessionToken><Expiration>"
                           f"{stand_in.expiration}</Expiration></Credentials></{action}Result>"
                           f"</{action}Response>")
                    return self._reply(200, xml.encode(), "text/xml")
                return self._reply(404, b"")

            def do_GET(self):
                self._handle("GET")

            def do_PUT(self):
                self._handle("PUT")

            def do_POST(self):
                self._handle("POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def aws():
    s = AwsStandIn()
    yield s
    s.close()


def chain(env, **kw) -> CredentialChain:
    base = {"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent/config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials"}
    return CredentialChain(region="us-east-1", env={**base, **env}, timeout_s=2.0, **kw)


def test_explicit_keys_win():
    ch = chain({"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "envsecret"},
               access_key_id=KEY_ID, secret_access_key=SECRET, session_token=SESSION)
    c = ch.credentials()
    assert (c.access_key_id, c.source) == (KEY_ID, "explicit keys")
    provider = MSKIAMTokenProvider("us-east-1", access_key_id=KEY_ID, secret_access_key=SECRET,
                                   session_token=SESSION, env={})
    shown = repr(c) + repr(ch) + repr(provider) + repr(provider.chain.credentials())
    assert SECRET not in shown and SESSION not in shown and KEY_ID not in shown


def test_environment():
    c = chain({"AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "envsecret",
               "AWS_SESSION_TOKEN": "envtoken"}).credentials()
    assert (c.access_key_id, c.secret_access_key, c.session_token, c.source) == (
        "ENVKEY", "envsecret", "envtoken", "environment")
    assert "envsecret" not in repr(c) and "envtoken" not in repr(c)


def test_environment_half_a_key_pair_is_named():
    with pytest.raises(AwsCredentialsError, match="environment: AWS_SECRET_ACCESS_KEY is not set") as e:
        chain({"AWS_ACCESS_KEY_ID": "ENVKEY"}).credentials()
    assert e.value.source == "environment" and "ENVKEY" not in str(e.value)


def test_profiles_from_the_shared_files(tmp_path):
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = defsecret\n"
                     "[work]\naws_access_key_id = WORKKEY\naws_secret_access_key = worksecret\n"
                     "aws_session_token = worktoken\n")
    config = tmp_path / "config"
    config.write_text("[profile cfgonly]\naws_access_key_id = CFGKEY\n"
                      "aws_secret_access_key = cfgsecret\n")
    files = {"AWS_SHARED_CREDENTIALS_FILE": str(creds), "AWS_CONFIG_FILE": str(config)}
    assert chain(files).credentials().access_key_id == "DEFKEY"
    work = chain({**files, "AWS_PROFILE": "work"}).credentials()
    assert (work.access_key_id, work.session_token) == ("WORKKEY", "worktoken")
    assert chain(files, profile="cfgonly").credentials().access_key_id == "CFGKEY"
    with pytest.raises(AwsCredentialsError, match="profile 'nope'.*neither") as e:
        chain(files, profile="nope").credentials()
    assert "secret" not in str(e.value)


def test_web_identity_from_the_environment(aws, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("eyJweb.identity.jwt")
    c = chain({"AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
               "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/app",
               "AWS_ROLE_SESSION_NAME": "s1", "AWS_ENDPOINT_URL_STS": aws.url}).credentials()
    assert (c.access_key_id, c.session_token, c.source) == ("ASIASTSITY", "sts-session",
                                                            "web identity")
    assert c.expiry == dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    method, path, headers, form = aws.requests[-1]
    assert (method, form["Action"], form["RoleArn"], form["RoleSessionName"],
            form["WebIdentityToken"]) == ("POST", "AssumeRoleWithWebIdentity",
                                          "arn:aws:iam::123456789012:role/app", "s1",
                                          "eyJweb.identity.jwt")
    assert "authorization" not in headers     # AssumeRoleWithWebIdentity is not signed


def test_web_identity_sts_refusal_is_named_without_the_token(aws, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("eyJsecret.identity.jwt")
    aws.fail["/"] = 403
    with pytest.raises(AwsCredentialsError, match=r"web identity: POST http://127.0.0.1:\d+/ "
                                                  r"answered HTTP 403") as e:
        chain({"AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file), "AWS_ROLE_ARN": "arn:x",
               "AWS_ENDPOINT_URL_STS": aws.url}).credentials()
    assert "eyJsecret" not in str(e.value) and e.value.source == "web identity"


def test_container_full_uri_with_authorization_token(aws, tmp_path):
    auth = tmp_path / "auth"
    auth.write_text("container-auth-token\n")
    c = chain({"AWS_CONTAINER_CREDENTIALS_FULL_URI": aws.url + "/container-creds",
               "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(auth)}).credentials()
    assert (c.secret_access_key, c.source) == ("secret-from-/container-creds", "container")
    with pytest.raises(AwsCredentialsError, match="container: GET .* HTTP 403") as e:
        chain({"AWS_CONTAINER_CREDENTIALS_FULL_URI": aws.url + "/container-creds",
               "AWS_CONTAINER_AUTHORIZATION_TOKEN": "wrong-token-55"}).credentials()
    assert "wrong-token-55" not in str(e.value)


def test_container_relative_uri(aws):
    c = chain({"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/container-creds",
               "AWS_CONTAINER_AUTHORIZATION_TOKEN": "container-auth-token"},
              container_endpoint=aws.url).credentials()
    assert c.source == "container"
    assert aws.requests[-1][1] == "/container-creds"


def test_instance_metadata_imdsv2(aws):
    c = chain({"AWS_EC2_METADATA_DISABLED": "false",
               "AWS_EC2_METADATA_SERVICE_ENDPOINT": aws.url}).credentials()
    assert c.source == "instance metadata (role instance-role)"
    assert c.session_token == "token-from-/latest/meta-data/iam/security-credentials/instance-role"
    put = aws.requests[0]
    assert put[0] == "PUT" and put[2]["x-aws-ec2-metadata-token-ttl-seconds"] == "21600"


def test_instance_metadata_down_is_bounded_and_named():
    t0 = time.monotonic()
    with pytest.raises(AwsCredentialsError, match=r"no AWS credentials found \(tried: .*instance "
                                                  r"metadata \(http://127.0.0.1:9/latest/api/token "
                                                  r"cannot be reached: .*\)\)") as e:
        # nothing listens on port 9 of 127.0.0.1: refused at once
        chain({"AWS_EC2_METADATA_DISABLED": "false",
               "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9"}).credentials()
    assert time.monotonic() - t0 < 3
    assert e.value.source == "chain"


def test_instance_metadata_unanswering_is_bounded(aws):
    """A metadata service that accepts the connection and never answers: one second."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        t0 = time.monotonic()
        with pytest.raises(AwsCredentialsError, match="instance metadata.*timed out"):
            chain({"AWS_EC2_METADATA_DISABLED": "false",
                   "AWS_EC2_METADATA_SERVICE_ENDPOINT":
                       f"http://127.0.0.1:{silent.getsockname()[1]}"}).credentials()
        assert time.monotonic() - t0 < 2.5


def test_web_identity_from_a_profile_and_unsupported_profiles(aws, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("eyJprofile.identity")
    config = tmp_path / "config"
    config.write_text(f"[profile eks]\nweb_identity_token_file = {token_file}\n"
                      f"role_arn = arn:aws:iam::1:role/eks\n"
                      f"[profile chained]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = eks\n"
                      f"[profile sso]\nsso_session = corp\n")
    files = {"AWS_CONFIG_FILE": str(config), "AWS_ENDPOINT_URL_STS": aws.url}
    c = chain(files, profile="eks").credentials()
    assert c.source == "web identity" and aws.requests[-1][3]["RoleArn"] == "arn:aws:iam::1:role/eks"
    with pytest.raises(AwsCredentialsError, match="profile 'chained': role_arn with source_profile "
                                                  "is not supported"):
        chain(files, profile="chained").credentials()
    with pytest.raises(AwsCredentialsError, match="profile 'sso': sso_session is not supported"):
        chain(files, profile="sso").credentials()


def test_nothing_found_names_every_source():
    with pytest.raises(AwsCredentialsError, match="no AWS credentials found \\(tried: explicit "
                                                  "keys, environment, web identity, shared files, "
                                                  "container, instance metadata\\)"):
        chain({}).credentials()


def test_role_arn_assumes_the_role_with_a_sigv4_signed_request(aws):
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    c = chain({"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
               "AWS_SESSION_TOKEN": SESSION, "AWS_ENDPOINT_URL_STS": aws.url},
              role_arn="arn:aws:iam::123456789012:role/kafka", clock=lambda: FROZEN_S).credentials()
    assert (c.access_key_id, c.source) == ("ASIASTSOLE",
                                           "assumed role arn:aws:iam::123456789012:role/kafka")
    method, path, headers, form = aws.requests[-1]
    assert form == {"Action": "AssumeRole", "Version": "2011-06-15",
                    "RoleArn": "arn:aws:iam::123456789012:role/kafka",
                    "RoleSessionName": "MSKSASLDefaultSession"}
    # botocore signs the same request at the same instant: the same Authorization header
    body = urllib.parse.urlencode(form).encode()
    req = AWSRequest("POST", aws.url + "/", data=body,
                     headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    with mock.patch("botocore.auth.get_current_datetime", return_value=FROZEN):
        SigV4Auth(Credentials(KEY_ID, SECRET, SESSION), "sts", "us-east-1").add_auth(req)
    assert headers["authorization"] == req.headers["Authorization"]
    ours = sign_headers("POST", aws.url + "/", body, AwsCredentials(KEY_ID, SECRET, SESSION),
                        "us-east-1", "sts", FROZEN_S,
                        {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    assert ours["Authorization"] == req.headers["Authorization"]


def test_credentials_cached_until_near_expiry(aws):
    now = [FROZEN_S]
    aws.expiration = "2025-03-14T15:30:00Z"      # 20 minutes after FROZEN
    c = CredentialChain(region="us-east-1", timeout_s=2.0, clock=lambda: now[0],
                        env={"AWS_CONTAINER_CREDENTIALS_FULL_URI": aws.url + "/container-creds",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN": "container-auth-token",
                             "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE":
                             "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true"})
    c.credentials()
    c.credentials()
    assert c.fetches == 1
    now[0] += 11 * 60                                # within 10 minutes of expiry: fetched again
    c.credentials()
    assert c.fetches == 2


# --------------------------------------------------------------------------- as settings
MSK_HOST = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"
IAM_JAAS = 'software.amazon.msk.auth.iam.IAMLoginModule required{};'


@pytest.mark.parametrize("settings", [
    {"sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": IAM_JAAS.format(""),
     "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler"},
    {"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": IAM_JAAS.format(""),
     "sasl.client.callback.handler.class":
         "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"},
    {"sasl.mechanism": "OAUTHBEARER",
     "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                         "required;",
     "sasl.login.callback.handler.class":
         "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"},
])
def test_java_library_settings_map_to_the_provider(settings):
    c = ProducerConfig({"bootstrap.servers": MSK_HOST, "security.protocol": "SASL_SSL", **settings})
    assert c.sasl_mechanism == "OAUTHBEARER"
    provider = c.sasl_oauth_token_provider
    assert isinstance(provider, MSKIAMTokenProvider) and provider.region == "eu-west-1"


def test_java_library_options():
    c = ProducerConfig({"bootstrap.servers": MSK_HOST, "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": IAM_JAAS.format(
                            ' awsProfileName="prod" awsRoleArn="arn:aws:iam::1:role/k" '
                            'awsRoleSessionName="s" awsDebugCreds="true"'),
                        "sasl_aws_region": "us-west-2"})
    chain_ = c.sasl_oauth_token_provider.chain
    assert c.sasl_oauth_token_provider.region == "us-west-2"
    assert (chain_.profile, chain_.role_arn, chain_.role_session_name) == (
        "prod", "arn:aws:iam::1:role/k", "s")
    with pytest.raises(ConfigError, match="awsFoo are not supported"):
        ProducerConfig({"bootstrap.servers": MSK_HOST, "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "AWS_MSK_IAM",
                        "sasl.jaas.config": IAM_JAAS.format(' awsFoo="1"')})


def test_region_needed(monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(ConfigError, match="needs the cluster's region: set sasl_aws_region"):
        ProducerConfig({"bootstrap.servers": "127.0.0.1:9098", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": IAM_JAAS.format("")})


# --------------------------------------------------------------------------------- on the wire
class SignerCheckedTokens:
    """The fault broker's accepted OAUTHBEARER tokens: any token that the AWS signer library makes
    identically for KEY_ID/SECRET at the token's own X-Amz-Date (the User-Agent taken from it)."""

    def __init__(self, region: str):
        self.region = region
        self.seen: list[str] = []

    def __contains__(self, token) -> bool:
        self.seen.append(token)
        try:
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(decode(token)).query))
            when = dt.datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
        except (ValueError, KeyError):
            return False
        expected, _ = signer_token(self.region, KEY_ID, SECRET, query.get("X-Amz-Security-Token"),
                                   when)
        ours_ua = "&User-Agent=" + urllib.parse.quote(query.get("User-Agent", ""), safe="-_.~")
        return decode(token) == decode(expected).split("&User-Agent=")[0] + ours_ua


def test_producer_sends_the_token_in_its_sasl_frame(monkeypatch):
    from faultbroker import FaultBroker, SaslServer

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    server = SaslServer(mechanisms=["OAUTHBEARER"])
    server.tokens = SignerCheckedTokens("eu-west-1")
    with FaultBroker(sasl=server) as b:
        b.create_topic("t", 1)
        # the Java library's settings, as a Spark job gives them (kafka. prefix removed)
        with Producer({"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                       "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": IAM_JAAS.format(""),
                       "sasl_aws_region": "eu-west-1", "linger_ms": 2}) as p:
            futs = [p.send("t", b"v%d" % i) for i in range(10)]
            assert [f.get(10).offset for f in futs] == list(range(10))
        assert server.tokens.seen                       # the token was checked ...
        assert server.log and all(ok for *_, ok in server.log)   # ... and accepted every time


def test_refused_or_missing_credentials_fail_the_login_typed(monkeypatch, caplog):
    from faultbroker import FaultBroker, SaslServer

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDHALFONLY")
    server = SaslServer(mechanisms=["OAUTHBEARER"])
    with FaultBroker(sasl=server) as b:
        p = Producer({"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "OAUTHBEARER",
                      "sasl_oauth_token_provider": MSKIAMTokenProvider("eu-west-1"),
                      "max_block_ms": 20000, "reconnect_backoff_max_ms": 300})
        try:
            t0 = time.monotonic()
            with pytest.raises(SaslAuthenticationError,
                               match="environment: AWS_SECRET_ACCESS_KEY is not set") as e:
                p.send("t", b"x").get(20)
            assert time.monotonic() - t0 < 5
            assert isinstance(e.value, AwsCredentialsError)
            assert e.value.source == "environment" and e.value.mechanism == "OAUTHBEARER"
            assert e.value.node is not None
        finally:
            p.close(2)


@pytest.mark.parametrize("mechanism", ["AWS_MSK_IAM", "OAUTHBEARER"])
def test_spark_options_of_the_java_library(mechanism):
    """A Spark job's options for Amazon's Java library work unchanged with the sink."""
    from spark_sink.options import settings_from_options

    settings = settings_from_options({
        "topic": "t", "kafka.bootstrap.servers": MSK_HOST, "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": IAM_JAAS.format(' awsRoleArn="arn:aws:iam::1:role/spark"'),
        "kafka.sasl.client.callback.handler.class":
            "software.amazon.msk.auth.iam.IAMClientCallbackHandler"})
    c = ProducerConfig(settings.producer_kwargs())
    assert c.sasl_mechanism == "OAUTHBEARER"
    assert isinstance(c.sasl_oauth_token_provider, MSKIAMTokenProvider)
    assert c.sasl_oauth_token_provider.region == "eu-west-1"
    assert c.sasl_oauth_token_provider.chain.role_arn == "arn:aws:iam::1:role/spark"
