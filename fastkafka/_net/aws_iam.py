"""Amazon MSK IAM: the OAUTHBEARER token MSK's IAM listeners accept, from the standard AWS credentials.

Of the network layer (the SASL settings build it from the Java library's settings); users import
it as :mod:`fastkafka.aws`. :class:`MSKIAMTokenProvider` is a ``sasl_oauth_token_provider``::

    Producer({"bootstrap.servers": "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098",
              "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
              "sasl_oauth_token_provider": MSKIAMTokenProvider("eu-west-1")})

The token is an AWS Signature Version 4 presigned URL for the action ``kafka-cluster:Connect`` on
``https://kafka.<region>.amazonaws.com/`` (service ``kafka-cluster``, valid ``X-Amz-Expires`` = 900 s,
a ``User-Agent`` query parameter after the signature), encoded base64url without padding: what
AWS's signer libraries (aws-msk-iam-sasl-signer-python, -go, -js) give. Its expiry is the earlier
of the signature's and the credentials'; the producer asks for a new one before it expires.

Credentials come from the standard chain, in the order AWS's SDKs use, the first source that has
them winning (:class:`CredentialChain`):

1. keys given to the provider (``access_key_id``, ``secret_access_key``, ``session_token``);
2. the environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``;
3. web identity: ``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN`` (``AWS_ROLE_SESSION_NAME``),
   exchanged at STS (``AssumeRoleWithWebIdentity``; EKS service accounts);
4. the shared credentials file (``AWS_SHARED_CREDENTIALS_FILE``, default ``~/.aws/credentials``) and
   the config file (``AWS_CONFIG_FILE``, default ``~/.aws/config``), profile ``profile`` /
   ``AWS_PROFILE`` / ``default`` (keys, or ``web_identity_token_file`` + ``role_arn``);
5. container credentials: ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` (ECS, at 169.254.170.2) or
   ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` with ``AWS_CONTAINER_AUTHORIZATION_TOKEN`` /
   ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (EKS Pod Identity);
6. the instance role by IMDSv2 (``AWS_EC2_METADATA_SERVICE_ENDPOINT``, default
   ``http://169.254.169.254``; ``AWS_EC2_METADATA_DISABLED=true`` skips it).

With ``role_arn`` the credentials found are used to assume that role (STS ``AssumeRole``, a SigV4
signed request). STS is ``AWS_ENDPOINT_URL_STS`` if set, else ``https://sts.<region>.amazonaws.com``.
Temporary credentials are kept until 10 minutes before they expire.

Only the standard library: no botocore. Every HTTP request is bounded by ``timeout_s`` (one second
for the instance metadata service, as the SDKs do): the provider runs on the producer's I/O thread.
Failures are :class:`~fastkafka.errors.AwsCredentialsError` naming the source that failed (and
what was tried), never a key, a session token or a web identity token.
"""
from __future__ import annotations

import base64
import configparser
import datetime as _dt
import hashlib
import hmac
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Callable

from fastkafka._version import __version__
from fastkafka.errors import AwsCredentialsError, ConfigError

__all__ = ["MSKIAMTokenProvider", "AwsCredentials", "CredentialChain", "msk_region_from_host"]

TOKEN_EXPIRES_S = 900
SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
DEFAULT_USER_AGENT = f"fastkafka/{__version__}"
DEFAULT_SESSION_NAME = "MSKSASLDefaultSession"
IMDS_ENDPOINT = "http://169.254.169.254"
CONTAINER_ENDPOINT = "http://169.254.170.2"
#: Temporary credentials are fetched again this long before they expire (the SDKs' mandatory
#: refresh window).
REFRESH_BEFORE_S = 600
_UNRESERVED = "-_.~"
_MSK_HOST = re.compile(r"\.kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")


def msk_region_from_host(host: str) -> str | None:
    """The region of an MSK broker or bootstrap host name (``b-1.c.x.c2.kafka.eu-west-1.amazonaws.com``
    -> ``eu-west-1``; MSK Serverless' ``*.kafka-serverless.<region>.amazonaws.com`` too)."""
    m = _MSK_HOST.search(host.strip().lower().rstrip("."))
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------- credentials
@dataclass(frozen=True)
class AwsCredentials:
    """An access key pair, its session token (temporary credentials) and expiry (epoch seconds or
    None), and which source gave it. The repr shows the key id's first characters only."""

    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)
    expiry: float | None = None
    source: str = "explicit"

    def __repr__(self) -> str:
        shown = self.access_key_id[:4] + "..." if self.access_key_id else "?"
        return (f"AwsCredentials({shown}, session_token={'yes' if self.session_token else 'no'}, "
                f"expiry={self.expiry}, source={self.source!r})")


def _utc_parse(text: str, source: str) -> float:
    try:
        value = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AwsCredentialsError(f"AWS credentials from {source}: the expiration "
                                  f"{text[:40]!r} is not an ISO 8601 time", source=source) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    return value.timestamp()


def _http(method: str, url: str, source: str, timeout_s: float, headers=None,
          data: bytes | None = None) -> bytes:
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.read(1 << 20)
    except urllib.error.HTTPError as e:
        detail = ""
        try:   # STS's and the metadata services' error codes (no secrets in them)
            body = e.read(4096).decode("utf-8", "replace")
            code = re.search(r"<Code>([^<]{1,80})</Code>", body) or re.search(
                r'"(?:Code|code)"\s*:\s*"([^"]{1,80})"', body)
            detail = f" ({code.group(1)})" if code else ""
        except Exception:
            pass
        raise AwsCredentialsError(f"AWS credentials from {source}: {method} {_redact(url)} "
                                  f"answered HTTP {e.code}{detail}", source=source) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise AwsCredentialsError(f"AWS credentials from {source}: {_redact(url)} cannot be "
                                  f"reached: {reason}", source=source) from None


def _redact(url: str) -> str:
    """The URL without its query (an STS query carries the web identity token)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _json_credentials(body: bytes, source: str) -> AwsCredentials:
    try:
        answer = json.loads(body)
        key, secret = answer["AccessKeyId"], answer["SecretAccessKey"]
    except (ValueError, KeyError, TypeError):
        raise AwsCredentialsError(f"AWS credentials from {source}: the answer has no "
                                  f"AccessKeyId / SecretAccessKey", source=source) from None
    if answer.get("Code", "Success") != "Success":
        raise AwsCredentialsError(f"AWS credentials from {source}: answered Code="
                                  f"{str(answer['Code'])[:60]}", source=source)
    expiry = answer.get("Expiration")
    return AwsCredentials(key, secret, answer.get("Token") or answer.get("SessionToken"),
                          _utc_parse(expiry, source) if expiry else None, source)


def _sts_credentials(body: bytes, source: str) -> AwsCredentials:
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise AwsCredentialsError(f"AWS credentials from {source}: STS answered no XML",
                                  source=source) from None
    found = {el.tag.rsplit("}", 1)[-1]: (el.text or "") for el in root.iter()}
    try:
        return AwsCredentials(found["AccessKeyId"], found["SecretAccessKey"],
                              found["SessionToken"], _utc_parse(found["Expiration"], source),
                              source)
    except KeyError:
        raise AwsCredentialsError(f"AWS credentials from {source}: STS answered without "
                                  f"Credentials", source=source) from None


class CredentialChain:
    """The standard AWS credential chain (see the module docstring); :meth:`resolve` returns the
    first source's credentials. ``env`` defaults to ``os.environ``; ``clock`` to ``time.time``.
    ``container_endpoint`` replaces http://169.254.170.2 (the ECS agent's address, which the SDKs
    do not let the environment change; tests point it at a stand-in)."""

    def __init__(self, *, region: str | None = None, profile: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 session_token: str | None = None, role_arn: str | None = None,
                 role_session_name: str | None = None, sts_endpoint: str | None = None,
                 timeout_s: float = 5.0, env=None, container_endpoint: str | None = None,
                 clock: Callable[[], float] = time.time):
        if (access_key_id is None) != (secret_access_key is None):
            raise ConfigError("access_key_id and secret_access_key go together: give both or "
                              "neither")
        if session_token is not None and access_key_id is None:
            raise ConfigError("session_token needs access_key_id and secret_access_key")
        self.region = region
        self.profile = profile
        self.role_arn = role_arn
        self.role_session_name = role_session_name or DEFAULT_SESSION_NAME
        self.sts_endpoint = sts_endpoint
        self.timeout_s = float(timeout_s)
        self.env = os.environ if env is None else env
        self.container_endpoint = container_endpoint or CONTAINER_ENDPOINT
        self.clock = clock
        self._explicit = (AwsCredentials(access_key_id, secret_access_key, session_token,
                                         None, "explicit keys")
                          if access_key_id is not None else None)
        self._cached: AwsCredentials | None = None
        self._lock = threading.Lock()
        self.fetches = 0

    def __repr__(self) -> str:
        return (f"CredentialChain(region={self.region!r}, profile={self.profile!r}, "
                f"role_arn={self.role_arn!r})")

    # -- the chain -------------------------------------------------------------------------------
    def credentials(self) -> AwsCredentials:
        """The cached credentials, fetched again when they are within REFRESH_BEFORE_S of expiry."""
        with self._lock:
            c = self._cached
            if c is not None and (c.expiry is None or c.expiry - self.clock() > REFRESH_BEFORE_S):
                return c
            c = self.resolve()
            if self.role_arn:
                c = self._assume_role(c)
            self._cached = c
            self.fetches += 1
            return c

    def resolve(self) -> AwsCredentials:
        tried = []
        sources = [("explicit keys", lambda: self._explicit), ("environment", self._from_env),
                   ("web identity", self._from_web_identity_env),
                   ("shared files", self._from_profile), ("container", self._from_container),
                   ("instance metadata", self._from_imds)]
        imds_failure = ""
        for name, source in sources:
            try:
                c = source()
            except AwsCredentialsError as e:
                if name != "instance metadata":
                    raise
                # the last resort: off EC2 it is simply not there; say why next to the rest
                c, imds_failure = None, " (" + e.message.split(": ", 1)[-1] + ")"
            if c is not None:
                return c
            tried.append(name)
        raise AwsCredentialsError(
            "no AWS credentials found (tried: " + ", ".join(tried) + imds_failure + "): set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity, or run "
            "with a role", source="chain")

    def _getenv(self, name: str) -> str | None:
        value = self.env.get(name)
        return value if value else None

    def _from_env(self) -> AwsCredentials | None:
        key, secret = self._getenv("AWS_ACCESS_KEY_ID"), self._getenv("AWS_SECRET_ACCESS_KEY")
        if key is None and secret is None:
            return None
        if key is None or secret is None:
            missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
            raise AwsCredentialsError(f"AWS credentials from the environment: {missing} is not "
                                      f"set (the other half of the key pair is)",
                                      source="environment")
        token = self._getenv("AWS_SESSION_TOKEN") or self._getenv("AWS_SECURITY_TOKEN")
        expiry = self._getenv("AWS_CREDENTIAL_EXPIRATION")
        return AwsCredentials(key, secret, token,
                              _utc_parse(expiry, "environment") if expiry else None, "environment")

    def _from_web_identity_env(self) -> AwsCredentials | None:
        token_file = self._getenv("AWS_WEB_IDENTITY_TOKEN_FILE")
        role = self._getenv("AWS_ROLE_ARN")
        if token_file is None and role is None:
            return None
        if token_file is None or role is None:
            missing = "AWS_ROLE_ARN" if token_file else "AWS_WEB_IDENTITY_TOKEN_FILE"
            raise AwsCredentialsError(f"AWS credentials from web identity: {missing} is not set",
                                      source="web identity")
        return self._web_identity(token_file, role, self._getenv("AWS_ROLE_SESSION_NAME"))

    def _web_identity(self, token_file: str, role: str, session: str | None) -> AwsCredentials:
        source = "web identity"
        try:
            with open(token_file, encoding="utf-8") as f:
                identity = f.read().strip()
        except OSError as e:
            raise AwsCredentialsError(f"AWS credentials from {source}: the token file "
                                      f"{token_file} cannot be read: {e.strerror}",
                                      source=source) from None
        form = {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": role,
                "RoleSessionName": session or f"fastkafka-{int(self.clock())}",
                "WebIdentityToken": identity}
        body = _http("POST", self._sts_url(), source, self.timeout_s,
                     {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
                     urllib.parse.urlencode(form).encode())
        return _sts_credentials(body, source)

    def _sts_url(self) -> str:
        url = self.sts_endpoint or self._getenv("AWS_ENDPOINT_URL_STS") or self._getenv(
            "AWS_ENDPOINT_URL")
        if url:
            return url.rstrip("/") + "/"
        region = self.region or self._getenv("AWS_REGION") or self._getenv("AWS_DEFAULT_REGION")
        return f"https://sts.{region}.amazonaws.com/" if region else "https://sts.amazonaws.com/"

    def _sts_region(self) -> str:
        return self.region or self._getenv("AWS_REGION") or self._getenv(
            "AWS_DEFAULT_REGION") or "us-east-1"

    def _profile_name(self) -> str:
        return self.profile or self._getenv("AWS_PROFILE") or "default"

    def _from_profile(self) -> AwsCredentials | None:
        name = self._profile_name()
        source = f"profile {name!r}"
        cred_file = os.path.expanduser(self._getenv("AWS_SHARED_CREDENTIALS_FILE")
                                       or "~/.aws/credentials")
        conf_file = os.path.expanduser(self._getenv("AWS_CONFIG_FILE") or "~/.aws/config")
        sections = {}
        for path, section in ((cred_file, name), (conf_file, name if name == "default"
                                                  else f"profile {name}")):
            parser = configparser.RawConfigParser()
            try:
                parser.read(path, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError) as e:
                raise AwsCredentialsError(f"AWS credentials from {source}: {path} cannot be "
                                          f"parsed ({type(e).__name__})", source=source) from None
            if parser.has_section(section):
                sections[path] = dict(parser.items(section))
        if not sections:
            if self.profile is not None or self._getenv("AWS_PROFILE"):
                raise AwsCredentialsError(f"AWS credentials from {source}: the profile is in "
                                          f"neither {cred_file} nor {conf_file}", source=source)
            return None
        for path, values in sections.items():
            key, secret = values.get("aws_access_key_id"), values.get("aws_secret_access_key")
            if key and secret:
                return AwsCredentials(key, secret, values.get("aws_session_token"), None,
                                      f"{source} in {path}")
            if key or secret:
                raise AwsCredentialsError(f"AWS credentials from {source} in {path}: "
                                          f"aws_access_key_id and aws_secret_access_key go "
                                          f"together", source=source)
        merged = {k: v for values in sections.values() for k, v in values.items()}
        if merged.get("web_identity_token_file") and merged.get("role_arn"):
            return self._web_identity(merged["web_identity_token_file"], merged["role_arn"],
                                      merged.get("role_session_name"))
        if merged.get("role_arn") or merged.get("sso_session") or merged.get("credential_process"):
            what = ("role_arn with source_profile" if merged.get("role_arn") else
                    "sso_session" if merged.get("sso_session") else "credential_process")
            raise AwsCredentialsError(
                f"AWS credentials from {source}: {what} is not supported here: use keys in the "
                f"profile, a web identity, or MSKIAMTokenProvider(role_arn=...) over another "
                f"source", source=source)
        return None

    def _from_container(self) -> AwsCredentials | None:
        relative = self._getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        full = self._getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        if relative is None and full is None:
            return None
        source = "container"
        url = self.container_endpoint.rstrip("/") + relative if relative else full
        headers = {"Accept": "application/json"}
        token = self._getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
        token_file = self._getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        if token_file:
            try:
                with open(token_file, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as e:
                raise AwsCredentialsError(f"AWS credentials from {source}: "
                                          f"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {token_file} "
                                          f"cannot be read: {e.strerror}", source=source) from None
        if token:
            if "\r" in token or "\n" in token:
                raise AwsCredentialsError(f"AWS credentials from {source}: the authorization "
                                          f"token has a line break", source=source)
            headers["Authorization"] = token
        return _json_credentials(_http("GET", url, source, self.timeout_s, headers), source)

    def _from_imds(self) -> AwsCredentials | None:
        if (self._getenv("AWS_EC2_METADATA_DISABLED") or "").lower() == "true":
            return None
        source = "instance metadata"
        base = (self._getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT") or IMDS_ENDPOINT).rstrip("/")
        timeout = min(self.timeout_s, 1.0)
        token = _http("PUT", base + "/latest/api/token", source, timeout,
                      {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}, b"").decode().strip()
        auth = {"X-aws-ec2-metadata-token": token}
        path = base + "/latest/meta-data/iam/security-credentials/"
        roles = _http("GET", path, source, timeout, auth).decode().split()
        if not roles:
            raise AwsCredentialsError(f"AWS credentials from {source}: the instance has no "
                                      f"role", source=source)
        body = _http("GET", path + urllib.parse.quote(roles[0]), source, timeout, auth)
        return _json_credentials(body, f"{source} (role {roles[0]})")

    def _assume_role(self, base: AwsCredentials) -> AwsCredentials:
        source = f"assumed role {self.role_arn}"
        form = urllib.parse.urlencode({"Action": "AssumeRole", "Version": "2011-06-15",
                                       "RoleArn": self.role_arn,
                                       "RoleSessionName": self.role_session_name}).encode()
        url = self._sts_url()
        headers = sign_headers("POST", url, form, base, self._sts_region(), "sts", self.clock(),
                               {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        return _sts_credentials(_http("POST", url, source, self.timeout_s, headers, form), source)


# ------------------------------------------------------------------------------------- SigV4
def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe=_UNRESERVED)


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _signature(creds: AwsCredentials, stamp: str, region: str, service: str,
               canonical_request: str) -> tuple[str, str]:
    day = stamp[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(("AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical_request.encode()).hexdigest()))
    key = _signing_key(creds.secret_access_key, day, region, service)
    return scope, hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _stamp(epoch_s: float) -> str:
    return _dt.datetime.fromtimestamp(int(epoch_s), _dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def presign_url(creds: AwsCredentials, region: str, epoch_s: float,
                expires_s: int = TOKEN_EXPIRES_S, user_agent: str = DEFAULT_USER_AGENT) -> str:
    """The SigV4 presigned GET ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect``
    signed at ``epoch_s`` (whole seconds), with ``User-Agent`` appended after the signature."""
    host = f"kafka.{region}.amazonaws.com"
    stamp = _stamp(epoch_s)
    scope = f"{stamp[:8]}/{region}/{SERVICE}/aws4_request"
    params = [("Action", ACTION), ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
              ("X-Amz-Credential", f"{creds.access_key_id}/{scope}"), ("X-Amz-Date", stamp),
              ("X-Amz-Expires", str(int(expires_s))), ("X-Amz-SignedHeaders", "host")]
    if creds.session_token is not None:
        params.append(("X-Amz-Security-Token", creds.session_token))
    canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(params))
    canonical_request = "\n".join(("GET", "/", canonical_query, f"host:{host}", "", "host",
                                   hashlib.sha256(b"").hexdigest()))
    _, sig = _signature(creds, stamp, region, SERVICE, canonical_request)
    query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in params)
    return (f"https://{host}/?{query}&X-Amz-Signature={sig}"
            f"&User-Agent={_quote(user_agent)}")


def sign_headers(method: str, url: str, body: bytes, creds: AwsCredentials, region: str,
                 service: str, epoch_s: float, headers: dict) -> dict:
    """``headers`` plus the SigV4 ``Authorization``, ``X-Amz-Date`` (and security token) of a
    request (STS AssumeRole)."""
    parts = urllib.parse.urlsplit(url)
    stamp = _stamp(epoch_s)
    out = dict(headers)
    out["X-Amz-Date"] = stamp
    if creds.session_token:
        out["X-Amz-Security-Token"] = creds.session_token
    signed = {k.lower(): " ".join(str(v).split()) for k, v in out.items()}
    signed["host"] = parts.netloc
    names = sorted(signed)
    query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in
                     sorted(urllib.parse.parse_qsl(parts.query, keep_blank_values=True)))
    canonical_request = "\n".join((method, _quote_path(parts.path or "/"), query,
                                   "".join(f"{n}:{signed[n]}\n" for n in names),
                                   ";".join(names), hashlib.sha256(body).hexdigest()))
    scope, sig = _signature(creds, stamp, region, service, canonical_request)
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={creds.access_key_id}/{scope}, "
                            f"SignedHeaders={';'.join(names)}, Signature={sig}")
    return out


def _quote_path(path: str) -> str:
    return urllib.parse.quote(path, safe="/" + _UNRESERVED)


# ------------------------------------------------------------------------------ token provider
class MSKIAMTokenProvider:
    """``sasl_oauth_token_provider`` for Amazon MSK IAM (see the module docstring).

    ``region``: the cluster's region (``None``: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``).
    ``profile``, ``role_arn`` (+ ``role_session_name``), explicit keys, ``sts_endpoint``,
    ``timeout_s``: the credentials (:class:`CredentialChain`). ``user_agent`` is the token's
    ``User-Agent`` query parameter (``fastkafka/<version>``). ``clock``: epoch seconds (tests).
    Called, it returns ``(token, expiry)``."""

    def __init__(self, region: str | None = None, *, profile: str | None = None,
                 role_arn: str | None = None, role_session_name: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 session_token: str | None = None, sts_endpoint: str | None = None,
                 timeout_s: float = 5.0, user_agent: str = DEFAULT_USER_AGENT,
                 expires_s: int = TOKEN_EXPIRES_S, env=None,
                 container_endpoint: str | None = None, clock: Callable[[], float] = time.time):
        env_map = os.environ if env is None else env
        region = region or env_map.get("AWS_REGION") or env_map.get("AWS_DEFAULT_REGION")
        if not region or not re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d+", region):
            raise ConfigError(f"MSKIAMTokenProvider needs the cluster's AWS region (e.g. "
                              f"'us-east-1'), got {region!r}")
        if not 1 <= int(expires_s) <= 900:
            raise ConfigError("expires_s must be between 1 and 900 (MSK's bound)")
        self.region = region
        self.user_agent = user_agent
        self.expires_s = int(expires_s)
        self.clock = clock
        self.chain = CredentialChain(
            region=region, profile=profile, access_key_id=access_key_id,
            secret_access_key=secret_access_key, session_token=session_token, role_arn=role_arn,
            role_session_name=role_session_name, sts_endpoint=sts_endpoint, timeout_s=timeout_s,
            env=env, container_endpoint=container_endpoint, clock=clock)
        self.calls = 0

    def __repr__(self) -> str:
        return f"MSKIAMTokenProvider({self.region!r}, {self.chain!r})"

    def __call__(self) -> tuple[str, float]:
        self.calls += 1
        creds = self.chain.credentials()
        now = int(self.clock())
        url = presign_url(creds, self.region, now, self.expires_s, self.user_agent)
        token = base64.urlsafe_b64encode(url.encode()).rstrip(b"=").decode("ascii")
        expiry = float(now + self.expires_s)
        if creds.expiry is not None:
            expiry = min(expiry, creds.expiry)
        if expiry <= self.clock():
            raise AwsCredentialsError(f"AWS credentials from {creds.source} have expired",
                                      source=creds.source)
        return token, expiry
