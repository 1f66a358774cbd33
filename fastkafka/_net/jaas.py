"""``sasl.jaas.config``: the Java client's SASL login line, read into the producer's SASL settings.

The grammar (one login module, as Kafka's clients take it)::

    <LoginModuleClass> <flag> [<key>=<value> ...] ;

``flag`` is ``required``, ``requisite``, ``sufficient`` or ``optional``; a value is a double-quoted
string (a backslash escapes the next character) or a bare word. What each module gives:

* ``...plain.PlainLoginModule`` / ``...scram.ScramLoginModule``: ``username`` and ``password`` become
  ``sasl_plain_username`` / ``sasl_plain_password`` (PLAIN, resp. SCRAM-SHA-256/512);
* ``...oauthbearer.OAuthBearerLoginModule``: either Kafka's unsecured login options
  (``unsecuredLoginStringClaim_sub="alice"``, ...; an unsigned JWS is made, as Kafka's default
  unsecured login does) or, with ``sasl.oauthbearer.token.endpoint.url``, the client-credentials
  flow (``clientId``, ``clientSecret``, optional ``scope``): the token is fetched from the endpoint;
* ``com.sun.security.auth.module.Krb5LoginModule`` (GSSAPI): ``useKeyTab=true keyTab="..."
  principal="..."`` become ``sasl_kerberos_keytab`` / ``sasl_kerberos_principal``;
  ``useTicketCache=true`` (optional ``ticketCache``, ``principal``) uses the ticket cache kinit
  filled; ``serviceName`` is ``sasl_kerberos_service_name``. ``storeKey``, ``doNotPrompt``,
  ``isInitiator=true``, ``refreshKrb5Config``, ``renewTGT`` and ``debug`` change nothing here (the
  keytab's ticket is kept in memory and acquired again before it expires; nothing prompts).

No error message, repr or log line of this module shows a value: a password or secret may be
anywhere in the line.
"""
from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

from fastkafka.errors import ConfigError, SaslAuthenticationError

__all__ = ["JaasEntry", "parse_jaas", "PLAIN_MODULE", "SCRAM_MODULE", "OAUTHBEARER_MODULE", "KRB5_MODULE",
           "unsecured_token_provider", "ClientCredentialsProvider", "apply_jaas",
           "as_token_provider", "parse_extensions"]

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
_MODULE_MECHANISMS = {
    PLAIN_MODULE: ("PLAIN",),
    SCRAM_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    OAUTHBEARER_MODULE: ("OAUTHBEARER",),
    KRB5_MODULE: ("GSSAPI",),
}


@dataclass(frozen=True)
class JaasEntry:
    """One parsed login module: its class, flag and options (values kept out of the repr)."""

    module: str
    flag: str
    options: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"JaasEntry({self.module}, {self.flag}, keys={sorted(self.options)})"


def _err(pos: int, what: str) -> ConfigError:
    # The position, never the text around it: a value may be a password.
    return ConfigError(f"sasl.jaas.config: {what} (at character {pos + 1}); the form is "
                       f"'<LoginModuleClass> required key=\"value\" ...;'")


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _word(text: str, i: int) -> tuple[str, int]:
    start = i
    while i < len(text) and not text[i].isspace() and text[i] not in '=;"':
        i += 1
    return text[start:i], i


def parse_jaas(text: str) -> JaasEntry:
    """Parse one JAAS login line; ConfigError (naming the position, not the text) if malformed."""
    if not isinstance(text, str):
        raise ConfigError(f"sasl.jaas.config must be a string, got {type(text).__name__}")
    i = _skip_space(text, 0)
    module, i = _word(text, i)
    if not module:
        raise _err(i, "no login module class")
    if not all(part.isidentifier() for part in module.split(".")):
        raise _err(0, "the login module is not a Java class name")
    i = _skip_space(text, i)
    flag, j = _word(text, i)
    if flag.lower() not in FLAGS:
        raise _err(i, f"the control flag must be one of {', '.join(FLAGS)}")
    i = j
    options: dict[str, str] = {}
    while True:
        i = _skip_space(text, i)
        if i >= len(text):
            raise _err(i, "missing ';' at the end")
        if text[i] == ";":
            break
        key_at = i
        key, i = _word(text, i)
        if not key:
            raise _err(i, "expected an option name")
        if i >= len(text) or text[i] != "=":
            raise _err(key_at, "an option has no '=value'")
        i += 1
        if i < len(text) and text[i] == '"':
            value, i = _quoted(text, i + 1)
        else:
            value, i = _word(text, i)
            if not value:
                raise _err(i, 'an option has an empty value (an empty one is written key="")')
        if key in options:
            raise _err(key_at, "an option is given twice")
        options[key] = value
    rest = _skip_space(text, i + 1)
    if rest < len(text):
        raise _err(rest, "text after ';' (only one login module is supported)")
    return JaasEntry(module, flag.lower(), options)


def _quoted(text: str, i: int) -> tuple[str, int]:
    start = i - 1
    out = []
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                break
            out.append(text[i + 1])
            i += 2
            continue
        if c == '"':
            return "".join(out), i + 1
        out.append(c)
        i += 1
    raise _err(start, "a quoted value is not closed")


# ------------------------------------------------------------------------------ OAUTHBEARER
def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


_UNSECURED = "unsecuredLogin"
_UNSECURED_PREFIXES = ("unsecuredLoginStringClaim_", "unsecuredLoginNumberClaim_",
                       "unsecuredLoginListClaim_")
_UNSECURED_KEYS = ("unsecuredLoginPrincipalClaimName", "unsecuredLoginLifetimeSeconds",
                   "unsecuredLoginScopeClaimName")


def _unsecured_claims(options: dict) -> tuple[dict, float]:
    """The claims of Kafka's unsecured login (without iat/exp) and the lifetime in seconds."""
    claims: dict = {}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key[len("unsecuredLoginStringClaim_"):]] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            name = key[len("unsecuredLoginNumberClaim_"):]
            try:
                number = float(value)
            except ValueError:
                raise ConfigError(f"sasl.jaas.config: {key} is not a number") from None
            claims[name] = int(number) if number.is_integer() else number
        elif key.startswith("unsecuredLoginListClaim_"):
            # Kafka's form: the first character separates the items (",a,b" -> ["a", "b"]).
            items = value[1:].split(value[0]) if value else []
            claims[key[len("unsecuredLoginListClaim_"):]] = [x for x in items if x]
        elif key.startswith("unsecuredLoginExtension_"):
            raise ConfigError(f"sasl.jaas.config: {key}: SASL extensions are not supported")
        elif key not in _UNSECURED_KEYS:
            raise ConfigError(f"sasl.jaas.config: option {key!r} is not one of Kafka's unsecured "
                              f"OAUTHBEARER login options (unsecuredLoginStringClaim_<name>, "
                              f"unsecuredLoginNumberClaim_<name>, unsecuredLoginListClaim_<name>, "
                              f"{', '.join(_UNSECURED_KEYS)}); for a token endpoint set "
                              f"sasl.oauthbearer.token.endpoint.url and clientId/clientSecret")
    principal = options.get("unsecuredLoginPrincipalClaimName", "sub")
    if not claims.get(principal):
        raise ConfigError(f"sasl.jaas.config: the unsecured OAUTHBEARER login needs the principal "
                          f"claim: unsecuredLoginStringClaim_{principal}=\"<user>\"")
    try:
        lifetime = float(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    except ValueError:
        raise ConfigError("sasl.jaas.config: unsecuredLoginLifetimeSeconds is not a number") from None
    if lifetime <= 0:
        raise ConfigError("sasl.jaas.config: unsecuredLoginLifetimeSeconds must be > 0")
    return claims, lifetime


def unsecured_token_provider(options: dict,
                             clock: Callable[[], float] = time.time) -> Callable[[], tuple]:
    """A token provider making Kafka's unsecured (``alg: none``) JWS from the login options."""
    claims, lifetime = _unsecured_claims(options)
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())

    def provide() -> tuple[str, float]:
        now = clock()
        body = {**claims, "iat": round(now, 3), "exp": round(now + lifetime, 3)}
        payload = _b64url(json.dumps(body, separators=(",", ":")).encode())
        return f"{header}.{payload}.", now + lifetime

    provide.__qualname__ = provide.__name__ = "unsecured_jws"
    return provide


def _jwt_expiry(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return float(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None


class ClientCredentialsProvider:
    """OAuth 2 client credentials (RFC 6749 4.4): POST to ``url`` with HTTP Basic authentication
    (client id and secret URL-encoded, as Kafka's client does) and ``grant_type=client_credentials``
    (plus ``scope``); returns the ``access_token`` and its expiry (``expires_in``, else the JWT's
    ``exp``). :class:`fastkafka._net.sasl.TokenSource` caches the token until shortly before it
    expires. Errors name the URL and the HTTP status, never the secret or the token."""

    def __init__(self, url: str, client_id: str, client_secret: str, scope: str | None = None,
                 timeout_s: float = 10.0, clock: Callable[[], float] = time.time,
                 extensions: dict | None = None):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"sasl.oauthbearer.token.endpoint.url must be an http(s) URL, got "
                              f"{url!r}")
        self.url = url
        self.scope = scope
        self.timeout_s = timeout_s
        self.clock = clock
        self._client_id = client_id
        self._secret = client_secret
        self._extensions = dict(extensions or {})
        self.calls = 0

    def extensions(self) -> dict:
        """SASL extensions sent with each token (the JAAS line's ``extension_<name>`` options)."""
        return dict(self._extensions)

    def __repr__(self) -> str:
        return f"ClientCredentialsProvider({self.url!r}, client_id={self._client_id!r}, ***)"

    def __call__(self) -> tuple[str, float]:
        self.calls += 1
        pair = (urllib.parse.quote(self._client_id, safe="") + ":"
                + urllib.parse.quote(self._secret, safe=""))
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        request = urllib.request.Request(
            self.url, data=urllib.parse.urlencode(form).encode("ascii"), method="POST",
            headers={"Authorization": "Basic " + base64.b64encode(pair.encode()).decode("ascii"),
                     "Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json"})
        now = self.clock()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read(1 << 20)
        except urllib.error.HTTPError as e:
            raise SaslAuthenticationError(f"OAUTHBEARER: the token endpoint {self.url} answered "
                                          f"HTTP {e.code}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise SaslAuthenticationError(f"OAUTHBEARER: the token endpoint {self.url} cannot be "
                                          f"reached: {reason}") from None
        try:
            answer = json.loads(body)
            token = answer["access_token"]
        except (ValueError, KeyError, TypeError):
            raise SaslAuthenticationError(f"OAUTHBEARER: the token endpoint {self.url} answered "
                                          f"without an access_token (JSON expected)") from None
        if not isinstance(token, str) or not token:
            raise SaslAuthenticationError(f"OAUTHBEARER: the token endpoint {self.url} answered "
                                          f"with an empty access_token")
        expires_in = answer.get("expires_in")
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in > 0:
            return token, now + float(expires_in)
        expiry = _jwt_expiry(token)
        if expiry is None:
            raise SaslAuthenticationError(f"OAUTHBEARER: the token endpoint {self.url} gave no "
                                          f"expires_in and the token has no exp claim")
        return token, expiry


class TokenMethodProvider:
    """An object with ``token() -> str`` (kafka-python's and aiokafka's AbstractTokenProvider
    shape, called synchronously) as a callable() -> (token, expiry): the expiry is the JWT's
    ``exp`` claim, else 5 minutes from now (a token that is not a JWT is asked for again then).
    Its ``extensions()``, if any, are sent with the token."""

    def __init__(self, provider, clock: Callable[[], float] = time.time):
        self.provider = provider
        self.clock = clock

    def __repr__(self) -> str:
        return f"TokenMethodProvider({type(self.provider).__name__})"

    def __call__(self) -> tuple[str, float]:
        token = self.provider.token()
        if not isinstance(token, str):
            raise TypeError(f"token() returned a {type(token).__name__}, not a str")
        expiry = _jwt_expiry(token)
        return token, expiry if expiry is not None else self.clock() + 300.0

    def extensions(self) -> dict:
        ext = getattr(self.provider, "extensions", None)
        return dict(ext() or {}) if callable(ext) else {}


def as_token_provider(name: str, value):
    """``sasl_oauth_token_provider``: a callable() -> (token, expiry), or an object with a
    ``token()`` method (wrapped in :class:`TokenMethodProvider`)."""
    if value is None:
        return None
    token = getattr(value, "token", None)
    if callable(token) and not callable(value):
        import inspect

        if inspect.iscoroutinefunction(token):
            raise ConfigError(f"{name}.token() is a coroutine function: the producer calls it "
                              f"synchronously (fastkafka.compat.aiokafka takes aiokafka's async "
                              f"providers)")
        return TokenMethodProvider(value)
    if callable(value):
        return value
    raise ConfigError(f"{name} must be a callable() -> (token, expiry_epoch_seconds) or an object "
                      f"with a token() method, got {type(value).__name__}")


def parse_extensions(text: str | None, where: str = "sasl.oauthbearer.extensions") -> dict:
    """``"key=value,key2=value2"`` as a dict of RFC 7628 SASL extensions (keys of letters only,
    values of printable ASCII, space and tab; ``auth`` is reserved). Errors name the key, never
    a value."""
    out: dict[str, str] = {}
    if not text:
        return out
    for item in text.split(","):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        check_extension(key, value if eq else None, where)
        if key in out:
            raise ConfigError(f"{where}: extension {key!r} is given twice")
        out[key] = value
    return out


def check_extension(key, value, where: str) -> None:
    if not isinstance(key, str) or not key or not (key.isascii() and key.isalpha()):
        raise ConfigError(f"{where}: an extension name must be ASCII letters only (RFC 7628), "
                          f"got {key!r}")
    if key == "auth":
        raise ConfigError(f"{where}: 'auth' is reserved (the token is sent under it)")
    if value is None:
        raise ConfigError(f"{where}: extension {key!r} has no '=value'")
    if not isinstance(value, str) or not all(c in "\t\r\n" or " " <= c <= "~" for c in value):
        raise ConfigError(f"{where}: the value of extension {key!r} must be printable ASCII")


# ------------------------------------------------------------------------- into the settings
_OIDC_NATIVE = ("sasl_oauthbearer_client_id", "sasl_oauthbearer_client_secret",
                "sasl_oauthbearer_scope")


def _http_timeout_s(v: dict) -> float:
    explicit = v.get("sasl_login_read_timeout_ms")
    if explicit is not None:
        if explicit < 1:
            raise ConfigError("sasl_login_read_timeout_ms must be >= 1")
        return explicit / 1000.0
    return min(v.get("request_timeout_ms") or 30_000, 10_000) / 1000.0


def _apply_oidc(v: dict) -> bool:
    """librdkafka's ``sasl.oauthbearer.method=oidc`` and the client-credentials settings: True if
    they made the token provider."""
    method = v.get("sasl_oauthbearer_method")
    if method is not None:
        if method.strip().lower() not in ("default", "oidc"):
            raise ConfigError(f"sasl_oauthbearer_method must be 'default' or 'oidc', got "
                              f"{method!r}")
        method = method.strip().lower()
    native = [n for n in _OIDC_NATIVE if v.get(n) is not None]
    if method != "oidc" and not native:
        return False
    if method == "default":
        raise ConfigError(f"{', '.join(native)} given, but sasl_oauthbearer_method is 'default': "
                          f"set it to 'oidc' for the client-credentials login")
    if v.get("sasl_mechanism") != "OAUTHBEARER":
        raise ConfigError(f"{', '.join(native) or 'sasl_oauthbearer_method=oidc'} given, but "
                          f"sasl_mechanism is {v.get('sasl_mechanism')}: the client-credentials "
                          f"login is for OAUTHBEARER")
    if v.get("sasl_jaas_config") is not None:
        if method == "oidc" or any(n != "sasl_oauthbearer_scope" for n in native):
            raise ConfigError("the client credentials are given both as sasl.oauthbearer.client.* "
                              "settings and in sasl.jaas.config: use one")
        return False   # a scope beside a JAAS line without one: apply_jaas takes it
    if v.get("sasl_oauth_token_provider") is not None:
        raise ConfigError("sasl_oauth_token_provider and the client-credentials settings "
                          "(sasl.oauthbearer.client.id ...) are both given: use one")
    missing = [n for n in ("sasl_oauthbearer_token_endpoint_url", "sasl_oauthbearer_client_id",
                           "sasl_oauthbearer_client_secret") if not v.get(n)]
    if missing:
        raise ConfigError(f"the OAUTHBEARER client-credentials login (sasl.oauthbearer.method="
                          f"oidc) needs {' and '.join(missing)}")
    v["sasl_oauth_token_provider"] = ClientCredentialsProvider(
        v["sasl_oauthbearer_token_endpoint_url"], v["sasl_oauthbearer_client_id"],
        v["sasl_oauthbearer_client_secret"], v.get("sasl_oauthbearer_scope"),
        timeout_s=_http_timeout_s(v))
    return True


MSK_IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
MSK_IAM_LOGIN_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
#: aws-msk-iam-auth's JAAS options: what each becomes (None: accepted, no effect here).
_MSK_OPTIONS = {"awsProfileName": "profile", "awsRoleArn": "role_arn",
                "awsRoleSessionName": "role_session_name",
                "awsRoleAccessKeyId": "access_key_id", "awsRoleSecretAccessKey": "secret_access_key",
                "awsRoleSessionToken": "session_token", "awsStsRegion": None,
                "awsDebugCreds": None, "awsMaxRetries": None, "awsMaxBackOffTimeMs": None}


def _apply_msk(v: dict, text: str | None, foreign: dict) -> bool:
    """Amazon MSK IAM as the Java library aws-msk-iam-auth is configured (sasl.mechanism
    AWS_MSK_IAM or OAUTHBEARER, IAMLoginModule, IAMOAuthBearerLoginCallbackHandler): the token
    provider becomes :class:`fastkafka.aws.MSKIAMTokenProvider` and the mechanism OAUTHBEARER
    (which MSK's IAM listeners take, as from every signer library). True if it applied."""
    entry = parse_jaas(text) if text is not None else None
    handler = foreign.get("sasl_login_callback_handler_class")
    mech = v.get("sasl_mechanism")
    wanted = (mech == "AWS_MSK_IAM" or (entry is not None and entry.module == MSK_IAM_MODULE)
              or (isinstance(handler, str) and handler.strip() == MSK_IAM_LOGIN_HANDLER))
    if not wanted:
        return False
    if mech not in ("AWS_MSK_IAM", "OAUTHBEARER"):
        raise ConfigError(f"Amazon MSK IAM (IAMLoginModule / IAMOAuthBearerLoginCallbackHandler) "
                          f"needs sasl.mechanism AWS_MSK_IAM or OAUTHBEARER, not {mech}")
    if entry is not None and entry.module not in (MSK_IAM_MODULE, OAUTHBEARER_MODULE):
        raise ConfigError(f"sasl.mechanism={mech} with Amazon MSK IAM needs sasl.jaas.config = "
                          f"'{MSK_IAM_MODULE} required [awsProfileName=\"...\"] "
                          f"[awsRoleArn=\"...\"];'")
    if v.get("sasl_oauth_token_provider") is not None:
        raise ConfigError("sasl_oauth_token_provider and Amazon MSK IAM settings are both given: "
                          "use one")
    options = dict(entry.options) if entry is not None else {}
    unknown = sorted(set(options) - set(_MSK_OPTIONS))
    if unknown:
        raise ConfigError(f"sasl.jaas.config: IAMLoginModule options {', '.join(unknown)} are not "
                          f"supported (supported: {', '.join(_MSK_OPTIONS)})")
    region = v.get("sasl_aws_region")
    if region is None:
        from fastkafka._net.aws_iam import msk_region_from_host

        found = {msk_region_from_host(host) for host, _ in v.get("bootstrap_servers") or ()}
        found.discard(None)
        if len(found) > 1:
            raise ConfigError(f"the bootstrap servers are in several AWS regions "
                              f"({', '.join(sorted(found))}): set sasl_aws_region")
        region = found.pop() if found else None
    kwargs = {arg: options[opt] for opt, arg in _MSK_OPTIONS.items()
              if arg is not None and opt in options}
    sts_region = options.get("awsStsRegion")
    if sts_region is not None:
        kwargs["sts_endpoint"] = f"https://sts.{sts_region}.amazonaws.com"
    from fastkafka._net.aws_iam import MSKIAMTokenProvider

    if region is None:
        import os

        if not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
            raise ConfigError("Amazon MSK IAM needs the cluster's region: set sasl_aws_region "
                              "(bootstrap hosts *.kafka.<region>.amazonaws.com give it, as does "
                              "AWS_REGION)")
    v["sasl_oauth_token_provider"] = MSKIAMTokenProvider(region, timeout_s=_http_timeout_s(v),
                                                         **kwargs)
    v["sasl_mechanism"] = "OAUTHBEARER"
    return True


def apply_jaas(v: dict, foreign: dict | None = None) -> None:
    """Fill the SASL settings of ``v`` (canonical names) from ``v["sasl_jaas_config"]``, checked
    against ``sasl_mechanism``. ConfigError for a module that does not fit, or for credentials
    given both ways. ``foreign``: the accepted settings of other clients given (by canonical
    dotted name: sasl.login.callback.handler.class may ask for Amazon MSK IAM)."""
    text = v.get("sasl_jaas_config")
    endpoint = v.get("sasl_oauthbearer_token_endpoint_url")
    if v.get("security_protocol") not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return   # fastkafka._net.sasl.check_settings names the SASL settings given without SASL
    parse_extensions(v.get("sasl_oauthbearer_extensions"))
    foreign = {k.replace(".", "_"): val for k, val in (foreign or {}).items()}
    if _apply_msk(v, text, foreign):
        return
    if v.get("sasl_mechanism") == "AWS_MSK_IAM":   # pragma: no cover (_apply_msk took it)
        raise ConfigError("sasl.mechanism=AWS_MSK_IAM needs IAMLoginModule")
    if _apply_oidc(v):
        return
    if text is None:
        if endpoint is not None:
            raise ConfigError("sasl.oauthbearer.token.endpoint.url needs sasl.jaas.config with "
                              "OAuthBearerLoginModule and its clientId and clientSecret")
        return
    entry = parse_jaas(text)
    mech = v.get("sasl_mechanism")
    mechanisms = _MODULE_MECHANISMS.get(entry.module)
    if mechanisms is None:
        known = ", ".join(_MODULE_MECHANISMS)
        raise ConfigError(f"sasl.jaas.config: login module {entry.module} is not supported "
                          f"(supported: {known})")
    if mech is None:
        raise ConfigError(f"sasl.jaas.config uses {entry.module.rsplit('.', 1)[1]}: set "
                          f"sasl.mechanism to {' or '.join(mechanisms)}")
    if mech not in mechanisms:
        raise ConfigError(f"sasl.jaas.config uses {entry.module.rsplit('.', 1)[1]}, which is for "
                          f"{' or '.join(mechanisms)}, but sasl.mechanism is {mech}")
    if entry.module == OAUTHBEARER_MODULE:
        if v.get("sasl_oauth_token_provider") is not None:
            raise ConfigError("sasl_oauth_token_provider and sasl.jaas.config are both given: "
                              "use one")
        v["sasl_oauth_token_provider"] = _oauth_provider(entry.options, endpoint, v)
        return
    if endpoint is not None:
        raise ConfigError("sasl.oauthbearer.token.endpoint.url is for OAUTHBEARER only")
    if entry.module == KRB5_MODULE:
        _apply_krb5(entry.options, v)
        return
    both = [n for n in ("sasl_plain_username", "sasl_plain_password") if v.get(n) is not None]
    if both:
        raise ConfigError(f"{' and '.join(both)} and sasl.jaas.config are both given: use one")
    unknown = sorted(set(entry.options) - {"username", "password"})
    if unknown:
        raise ConfigError(f"sasl.jaas.config: {entry.module.rsplit('.', 1)[1]} takes username and "
                          f"password, not {', '.join(unknown)}")
    missing = [k for k in ("username", "password") if k not in entry.options]
    if missing:
        raise ConfigError(f"sasl.jaas.config: {entry.module.rsplit('.', 1)[1]} needs "
                          f"{' and '.join(missing)}")
    v["sasl_plain_username"] = entry.options["username"]
    v["sasl_plain_password"] = entry.options["password"]


def _oauth_provider(options: dict, endpoint: str | None, v: dict):
    if endpoint is None:
        if any(k in options for k in ("clientId", "clientSecret")):
            raise ConfigError("sasl.jaas.config has clientId/clientSecret: set "
                              "sasl.oauthbearer.token.endpoint.url to the token endpoint")
        return unsecured_token_provider(options)
    unsecured = [k for k in options if k.startswith(_UNSECURED)]
    if unsecured:
        raise ConfigError("sasl.jaas.config: unsecuredLogin* options and "
                          "sasl.oauthbearer.token.endpoint.url are exclusive")
    missing = [k for k in ("clientId", "clientSecret") if not options.get(k)]
    if missing:
        raise ConfigError(f"sasl.jaas.config: the token endpoint needs {' and '.join(missing)}")
    extensions = {}
    for key, value in options.items():
        if key.startswith("extension_"):
            check_extension(key[len("extension_"):], value, "sasl.jaas.config")
            extensions[key[len("extension_"):]] = value
    unknown = sorted(k for k in set(options) - {"clientId", "clientSecret", "scope"}
                     if not k.startswith("extension_"))
    if unknown:
        raise ConfigError(f"sasl.jaas.config: OAuthBearerLoginModule with a token endpoint takes "
                          f"clientId, clientSecret, scope and extension_<name>, not "
                          f"{', '.join(unknown)}")
    scope = options.get("scope")
    if scope is not None and v.get("sasl_oauthbearer_scope") is not None:
        raise ConfigError("the scope is given both as sasl.oauthbearer.scope and in "
                          "sasl.jaas.config: use one")
    return ClientCredentialsProvider(endpoint, options["clientId"], options["clientSecret"],
                                     scope or v.get("sasl_oauthbearer_scope"),
                                     timeout_s=_http_timeout_s(v), extensions=extensions)


# ---------------------------------------------------------------------------------- Kerberos
_KRB5_IGNORED = ("storeKey", "doNotPrompt", "refreshKrb5Config", "renewTGT", "debug", "isInitiator")
_KRB5_KEYS = ("useKeyTab", "keyTab", "principal", "useTicketCache", "ticketCache", "serviceName")


def _flag(options: dict, key: str) -> bool:
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"sasl.jaas.config: Krb5LoginModule's {key} must be true or false")
    return value == "true"


def _apply_krb5(options: dict, v: dict) -> None:
    """Krb5LoginModule's options into the GSSAPI settings of ``v``."""
    unknown = sorted(set(options) - set(_KRB5_KEYS) - set(_KRB5_IGNORED))
    if unknown:
        raise ConfigError(f"sasl.jaas.config: Krb5LoginModule option(s) {', '.join(unknown)} are "
                          f"not supported (supported: {', '.join(_KRB5_KEYS + _KRB5_IGNORED)})")
    for key in _KRB5_IGNORED:
        if key in options:
            _flag(options, key)
    if "isInitiator" in options and not _flag(options, "isInitiator"):
        raise ConfigError("sasl.jaas.config: Krb5LoginModule isInitiator=false is a server's "
                          "login; a producer initiates (isInitiator=true)")
    use_keytab, use_cache = _flag(options, "useKeyTab"), _flag(options, "useTicketCache")
    if not use_keytab and not use_cache:
        raise ConfigError("sasl.jaas.config: Krb5LoginModule needs useKeyTab=true with keyTab and "
                          "principal, or useTicketCache=true (a ticket cache filled by kinit): "
                          "nothing here can prompt for a password")
    given = {"sasl_kerberos_keytab": "keyTab", "sasl_kerberos_principal": "principal",
             "sasl_kerberos_ticket_cache": "ticketCache"}
    both = [n for n, k in given.items() if k in options and v.get(n) is not None]
    if both:
        raise ConfigError(f"{' and '.join(both)} and sasl.jaas.config are both given: use one")
    if use_keytab:
        missing = [k for k in ("keyTab", "principal") if not options.get(k)]
        if missing:
            raise ConfigError(f"sasl.jaas.config: Krb5LoginModule useKeyTab=true needs "
                              f"{' and '.join(missing)}")
        v["sasl_kerberos_keytab"] = options["keyTab"]
        v["sasl_kerberos_principal"] = options["principal"]
        # useTicketCache beside useKeyTab: the Java client reads the cache first and falls back to
        # the keytab; here the keytab's ticket, in the producer's own cache, is used.
    else:
        if "keyTab" in options:
            raise ConfigError("sasl.jaas.config: Krb5LoginModule keyTab is given without "
                              "useKeyTab=true")
        if options.get("principal"):
            v["sasl_kerberos_principal"] = options["principal"]
        if options.get("ticketCache"):
            v["sasl_kerberos_ticket_cache"] = options["ticketCache"]
    if options.get("serviceName"):
        v["sasl_kerberos_service_name"] = options["serviceName"]
