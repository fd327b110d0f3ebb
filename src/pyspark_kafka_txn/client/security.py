"""TLS and SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) for client connections.

Options use the names users give Spark's Kafka connector (``kafka.`` prefix removed):
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl.truststore.location``
/ ``.type`` / ``.password`` (JKS, Kafka's default type, PKCS12 or PEM; or librdkafka's
``ssl.ca.location``), ``ssl.keystore.location`` / ``.type`` / ``.password`` (JKS, PKCS12, or
PEM: or ``ssl.certificate.location`` + ``ssl.key.location``), ``ssl.key.password`` (JKS and
PKCS12 stores are read by :mod:`pyspark_kafka_txn.client.keystores`),
``ssl.endpoint.identification.algorithm``
(``https`` = verify the host name, empty = do not), ``sasl.mechanism`` and
``sasl.jaas.config`` (``...PlainLoginModule required username="u" password="p";``, also
``ScramLoginModule``) or librdkafka's ``sasl.username`` / ``sasl.password``. OAUTHBEARER
takes its token from ``sasl.oauthbearer.token.provider`` or from OIDC client credentials
(``sasl.oauthbearer.token.endpoint.url`` and ``OAuthBearerLoginModule required clientId="..."
clientSecret="..." scope="...";``): see :mod:`pyspark_kafka_txn.client.oauth`. GSSAPI
(Kerberos) takes ``sasl.kerberos.service.name`` and a ``Krb5LoginModule`` JAAS line: see
:mod:`pyspark_kafka_txn.client.kerberos`.

Secrets never appear in ``repr``, logs or exception messages.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark_kafka_txn.client.errors import AuthenticationError, ConfigError
from pyspark_kafka_txn.client.kerberos import (
    GSSAPI,
    KERBEROS_OPTIONS,
    KerberosConfig,
    require_gssapi,
)
from pyspark_kafka_txn.client.keystores import StoreSpec, check_stores, java_stores, load_key_store
from pyspark_kafka_txn.client.oauth import OAUTH_OPTIONS, OAuthConfig
from pyspark_kafka_txn.wire import (
    SASL_MECHANISMS,
    SASL_PROTOCOLS,
    SECURITY_PROTOCOLS,
    TLS_PROTOCOLS,
)

__all__ = [
    "SECURITY_OPTIONS",
    "ScramClient",
    "SecurityConfig",
]

_SCRAM_MIN_ITERATIONS = 4096
_JAAS_PAIR = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_OAUTH_MODULE = "OAuthBearerLoginModule"

#: Option names understood by :meth:`SecurityConfig.from_options`.
SECURITY_OPTIONS = frozenset(
    {
        "security.protocol",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.ca.location",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.endpoint.identification.algorithm",
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        *OAUTH_OPTIONS,
        *KERBEROS_OPTIONS,
    }
)


@dataclass(frozen=True)
class SecurityConfig:
    """How to secure a connection.

    Attributes
    ----------
    protocol
        PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    ca_file, cert_file, key_file
        PEM files: trusted CAs (None = system defaults), client certificate and key.
    key_password
        Password of ``key_file`` (hidden from repr).
    truststore, keystore
        JKS or PKCS12 stores (instead of ``ca_file``, ``cert_file`` and ``key_file``),
        read when a connection is made.
    check_hostname
        Verify the broker's host name against its certificate.
    sasl_mechanism
        PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI.
    username, password
        SASL credentials (the password is hidden from repr).
    oauth
        The OAUTHBEARER token source (required for, and only for, that mechanism).
    kerberos
        The GSSAPI credentials and service name (required for, and only for, GSSAPI).
    """

    protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = field(default=None, repr=False)
    truststore: StoreSpec | None = None
    keystore: StoreSpec | None = None
    check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    oauth: OAuthConfig | None = None
    kerberos: KerberosConfig | None = None

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}")
        if self.uses_sasl:
            if self.sasl_mechanism not in (*SASL_MECHANISMS, GSSAPI):
                raise ConfigError(
                    f"sasl.mechanism must be one of {', '.join((*SASL_MECHANISMS, GSSAPI))}, "
                    f"got {self.sasl_mechanism!r}"
                )
            if self.sasl_mechanism == GSSAPI:
                if self.kerberos is None:
                    raise ConfigError("sasl.mechanism=GSSAPI needs Kerberos settings")
                require_gssapi()
            elif self.sasl_mechanism == "OAUTHBEARER":
                if self.oauth is None:
                    raise ConfigError(
                        "sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.provider or "
                        "sasl.oauthbearer.token.endpoint.url with client credentials"
                    )
            elif self.username is None or self.password is None:
                raise ConfigError(
                    "SASL needs a username and password (sasl.jaas.config or "
                    "sasl.username / sasl.password)"
                )

    @property
    def uses_tls(self) -> bool:
        """Whether the socket is wrapped in TLS."""
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        """Whether SASL authentication follows ApiVersions."""
        return self.protocol in SASL_PROTOCOLS

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SecurityConfig:
        """Parse the Kafka option names listed in the module docstring.

        Raises
        ------
        ConfigError
            For a store that cannot be read (type, password, file, entries), unknown
            protocols or mechanisms, or SASL without credentials. Messages never include
            secret values.
        """
        opts = dict(options)
        check_stores(opts)
        truststore, java_keystore = java_stores(opts)
        username = opts.get("sasl.username")
        password = opts.get("sasl.password")
        jaas = opts.get("sasl.jaas.config")
        mechanism = opts.get("sasl.mechanism", "PLAIN").upper()
        oauth = kerberos = None
        if mechanism == GSSAPI:
            kerberos = KerberosConfig.from_options(opts)
        elif mechanism == "OAUTHBEARER":
            oauth_args = None
            if jaas:
                if _OAUTH_MODULE not in (jaas.split() or [""])[0]:
                    raise ConfigError(
                        "sasl.jaas.config must use OAuthBearerLoginModule with "
                        "sasl.mechanism=OAUTHBEARER"
                    )
                oauth_args = {k: v.replace('\\"', '"') for k, v in _JAAS_PAIR.findall(jaas)}
            oauth = OAuthConfig.from_options(opts, oauth_args)
        elif jaas:
            pairs = {k: v.replace('\\"', '"') for k, v in _JAAS_PAIR.findall(jaas)}
            if "username" not in pairs or "password" not in pairs:
                raise ConfigError('sasl.jaas.config must set username="..." and password="..."')
            username, password = pairs["username"], pairs["password"]
        keystore = None if java_keystore else opts.get("ssl.keystore.location")
        pem_truststore = None if truststore else opts.get("ssl.truststore.location")
        algo = opts.get("ssl.endpoint.identification.algorithm", "https")
        return cls(
            protocol=opts.get("security.protocol", "PLAINTEXT").upper(),
            ca_file=pem_truststore or opts.get("ssl.ca.location"),
            cert_file=opts.get("ssl.certificate.location") or keystore,
            key_file=opts.get("ssl.key.location") or keystore,
            key_password=None
            if java_keystore
            else opts.get("ssl.key.password") or opts.get("ssl.keystore.password"),
            truststore=truststore,
            keystore=java_keystore,
            check_hostname=algo.lower() == "https",
            sasl_mechanism=mechanism,
            username=username,
            password=password,
            oauth=oauth,
            kerberos=kerberos,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context for these settings."""
        cadata = self.truststore.trusted_pem() if self.truststore is not None else None
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=cadata)
            ctx.check_hostname = self.check_hostname
            if self.keystore is not None:
                load_key_store(ctx, self.keystore)
            elif self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file, password=self.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load TLS files: {type(exc).__name__}") from None
        return ctx


class ScramClient:
    """Client side of SCRAM (RFC 5802 / RFC 7677) without channel binding.

    Parameters
    ----------
    mechanism
        ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (``SCRAM-SHA-1`` only for RFC test vectors).
    username, password
        Credentials.
    nonce
        Client nonce (random if None; fixed only in tests).
    """

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        self._hash = mechanism.removeprefix("SCRAM-").replace("-", "").lower()
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        user = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={user},r={self._nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        """client-first-message."""
        return f"n,,{self._first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        """client-final-message for the server-first-message."""
        try:
            text = server_first.decode()
            attrs = dict(part.split("=", 1) for part in text.split(","))
            nonce, iterations = attrs.get("r", ""), attrs.get("i", "")
            salt = base64.b64decode(attrs.get("s", ""), validate=True)
        except ValueError:  # also UnicodeDecodeError, binascii.Error
            raise AuthenticationError("SCRAM: malformed server-first-message") from None
        if not nonce.startswith(self._nonce) or not salt or not iterations.isdigit():
            raise AuthenticationError("SCRAM: malformed server-first-message")
        if int(iterations) < _SCRAM_MIN_ITERATIONS:
            # As Kafka's ScramSaslClient: a lower count would weaken the stored credential.
            raise AuthenticationError(
                f"SCRAM: the server asked for {iterations} iterations, "
                f"below the minimum {_SCRAM_MIN_ITERATIONS}"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature (mutual authentication)."""
        if server_final.startswith(b"e="):
            error = server_final[2:].decode(errors="replace")
            raise AuthenticationError(f"SCRAM: server error {error}")
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final.split(b",")[0], expected):
            raise AuthenticationError("SCRAM: the server's signature does not match")
