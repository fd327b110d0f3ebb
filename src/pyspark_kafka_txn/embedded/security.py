"""Listener security of the embedded cluster: TLS and SASL (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER with unsecured JWTs, see :mod:`~pyspark_kafka_txn.embedded.oauth`).

Behaviour follows Kafka's ``SaslServerAuthenticator``: on a SASL listener a connection
may send only ApiVersions, SaslHandshake and SaslAuthenticate until it has
authenticated; anything else closes it. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and the connection is then closed. SaslHandshake v0 switches
the connection to raw SASL tokens (no Kafka framing), as old clients expect. SCRAM is
RFC 5802/7677 with Kafka's minimum of 4096 iterations; credentials are derived from the
configured passwords at start and kept in a :class:`ScramStore` of the cluster, which
AlterUserScramCredentials changes at run time (as Kafka keeps them in its metadata).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pyspark_kafka_txn.embedded.oauth import OAuthBearerMechanism
from pyspark_kafka_txn.wire import (
    PASSWORD_SASL_MECHANISMS,
    SASL_MECHANISMS,
    SASL_PROTOCOLS,
    SECURITY_PROTOCOLS,
    TLS_PROTOCOLS,
)

logger = logging.getLogger(__name__)

SCRAM_ITERATIONS = 4096
ANONYMOUS = "User:ANONYMOUS"
# X.500 attribute keywords of RFC 2253 (as Java's X500Principal writes them).
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class SaslAuthenticationError(Exception):
    """Credentials or the SASL exchange were rejected."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerSecurity:
    """How the brokers' listeners authenticate clients.

    Parameters
    ----------
    protocol
        ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
    sasl_mechanisms
        Mechanisms enabled on SASL listeners (OAUTHBEARER, which trusts any unsecured
        JWT, only when named).
    users
        ``{username: password}`` accepted by SASL; never logged.
    ssl_certfile, ssl_keyfile
        PEM server certificate (chain) and key, required for SSL and SASL_SSL.
    ssl_cafile
        PEM CA bundle to verify client certificates with (``ssl_client_auth``).
    ssl_client_auth
        Require a client certificate (``ssl.client.auth=required``).
    """

    protocol: str = "PLAINTEXT"
    sasl_mechanisms: tuple[str, ...] = PASSWORD_SASL_MECHANISMS
    users: Mapping[str, str] = field(default_factory=dict, repr=False)
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_cafile: Path | None = None
    ssl_client_auth: bool = False

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security protocol must be one of {SECURITY_PROTOCOLS}, got {self.protocol!r}"
            )
        unknown = set(self.sasl_mechanisms) - set(SASL_MECHANISMS)
        if unknown:
            raise ValueError(f"unsupported SASL mechanisms {sorted(unknown)}")
        if self.uses_ssl and (self.ssl_certfile is None or self.ssl_keyfile is None):
            raise ValueError(f"{self.protocol} needs ssl_certfile and ssl_keyfile")
        if self.ssl_client_auth and self.ssl_cafile is None:
            raise ValueError("ssl_client_auth needs ssl_cafile to verify client certificates")

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context, or None for plaintext listeners."""
        if not self.uses_ssl:
            return None
        assert self.ssl_certfile is not None and self.ssl_keyfile is not None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.ssl_certfile), str(self.ssl_keyfile))
        if self.ssl_cafile is not None:
            context.load_verify_locations(cafile=str(self.ssl_cafile))
        context.verify_mode = ssl.CERT_REQUIRED if self.ssl_client_auth else ssl.CERT_NONE
        return context


class SaslMechanism(Protocol):
    """Server side of one SASL exchange."""

    user: str | None  # the authenticated user once the exchange completed

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """Process a client token; return (server token, exchange complete)."""
        ...


class PlainMechanism:
    """SASL/PLAIN (RFC 4616): one message ``authzid NUL user NUL password``."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("invalid SASL/PLAIN message")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise SaslAuthenticationError("authorization id must match the user name")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Invalid username or password")
        self.user = user
        return b"", True


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """Stored SCRAM credential (what Kafka keeps instead of the password)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def scram_credential(
    password: str, hash_name: str, iterations: int = SCRAM_ITERATIONS
) -> ScramCredential:
    """Derive a SCRAM credential from a password with a fresh random salt."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    return credential_from_salted(salted, salt, iterations, hash_name)


def credential_from_salted(
    salted_password: bytes, salt: bytes, iterations: int, hash_name: str
) -> ScramCredential:
    """The stored credential of a salted password (what AlterUserScramCredentials sends)."""
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=hmac.new(salted_password, b"Server Key", hash_name).digest(),
    )


#: SCRAM mechanisms by their ScramMechanism code in the admin APIs, with their hashes.
SCRAM_MECHANISM_CODES = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
SCRAM_MAX_ITERATIONS = 16384
_SCRAM_HASHES = dict(SCRAM_MECHANISM_CODES.values())  # mechanism name -> hashlib name


class ScramStore:
    """The cluster's SCRAM credentials: ``{mechanism: {user: credential}}``.

    Seeded from the listener's configured users (a credential for every SCRAM mechanism);
    AlterUserScramCredentials adds, replaces and deletes them. Only salts and derived keys
    are kept, never a password.
    """

    def __init__(self, users: Mapping[str, str]) -> None:
        self.credentials: dict[str, dict[str, ScramCredential]] = {
            name: {user: scram_credential(password, hash_name) for user, password in users.items()}
            for name, hash_name in SCRAM_MECHANISM_CODES.values()
        }

    def to_json(self) -> dict[str, dict[str, list[object]]]:
        return {
            mechanism: {
                user: [c.salt.hex(), c.iterations, c.stored_key.hex(), c.server_key.hex()]
                for user, c in users.items()
            }
            for mechanism, users in self.credentials.items()
        }

    def load(self, saved: Mapping[str, Mapping[str, list[object]]]) -> None:
        for mechanism, users in saved.items():
            self.credentials[mechanism] = {
                user: ScramCredential(
                    bytes.fromhex(str(salt)),
                    int(str(iterations)),
                    bytes.fromhex(str(stored)),
                    bytes.fromhex(str(server)),
                )
                for user, (salt, iterations, stored, server) in users.items()
            }


def _scram_attrs(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslAuthenticationError(f"malformed SCRAM attribute {part[:16]!r}")
        attrs[part[0]] = part[2:]
    return attrs


class ScramMechanism:
    """SASL/SCRAM-SHA-256 or -512 (RFC 5802), server side, two round trips."""

    def __init__(self, credentials: Mapping[str, ScramCredential], hash_name: str) -> None:
        self._credentials = credentials
        self._hash = hash_name
        self._state = 0
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        self._credential: ScramCredential | None = None
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        message = token.decode("utf-8", "replace")
        if self._state == 0:
            return self._first(message), False
        if self._state == 1:
            return self._final(message), True
        raise SaslAuthenticationError("unexpected SCRAM message after completion")

    def _first(self, message: str) -> bytes:
        pieces = message.split(",", 2)
        # gs2 header: no channel binding ("n" or "y"), optional "a=authzid"
        if (
            len(pieces) != 3
            or pieces[0] not in ("n", "y")
            or (pieces[1] and not pieces[1].startswith("a="))
        ):
            raise SaslAuthenticationError("invalid SCRAM client-first message")
        self._gs2 = f"{pieces[0]},{pieces[1]},"
        self._client_first_bare = pieces[2]
        attrs = _scram_attrs(self._client_first_bare)
        if "m" in attrs:
            raise SaslAuthenticationError("SCRAM extensions are not supported")
        user = attrs.get("n", "").replace("=2C", ",").replace("=3D", "=")
        if pieces[1].startswith("a=") and pieces[1][2:] != user:
            raise SaslAuthenticationError("authorization id must match the user name")
        credential = self._credentials.get(user)
        if credential is None:
            raise SaslAuthenticationError("Invalid username or password")
        self._credential = credential
        self.user = user
        self._nonce = attrs.get("r", "") + secrets.token_urlsafe(18)
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = 1
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        assert self._credential is not None
        without_proof, _, proof_attr = message.rpartition(",p=")
        attrs = _scram_attrs(without_proof)
        if attrs.get("r") != self._nonce:
            raise SaslAuthenticationError("SCRAM nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != self._gs2.encode():
            raise SaslAuthenticationError("SCRAM channel binding mismatch")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(self._credential.stored_key, auth_message, self._hash).digest()
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError as exc:
            raise SaslAuthenticationError("malformed SCRAM proof") from exc
        if len(proof) != len(signature):
            raise SaslAuthenticationError("Invalid username or password")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), self._credential.stored_key
        ):
            raise SaslAuthenticationError("Invalid username or password")
        server_signature = hmac.new(self._credential.server_key, auth_message, self._hash).digest()
        self._state = 2
        return b"v=" + base64.b64encode(server_signature)


class Authenticator:
    """Creates the per-connection SASL mechanism objects of a listener."""

    def __init__(self, security: ListenerSecurity, scram: ScramStore) -> None:
        self.security = security
        self._scram = scram.credentials

    @property
    def required(self) -> bool:
        return self.security.uses_sasl

    def mechanism(self, name: str) -> SaslMechanism | None:
        """A fresh server for ``name``, or None if it is not enabled."""
        if name not in self.security.sasl_mechanisms or not self.required:
            return None
        if name == "PLAIN":
            return PlainMechanism(self.security.users)
        if name == "OAUTHBEARER":
            return OAuthBearerMechanism(SaslAuthenticationError)
        return ScramMechanism(self._scram.setdefault(name, {}), _SCRAM_HASHES[name])


@dataclass(slots=True)
class Session:
    """Authentication state of one client connection."""

    authenticator: Authenticator
    authenticated: bool = False
    mechanism: SaslMechanism | None = None
    mechanism_name: str = ""
    raw_tokens: bool = False  # after SaslHandshake v0
    close_after_response: bool = False
    principal: str = ANONYMOUS
    host: str = ""  # the client's address, as ACL hosts name it

    @property
    def needs_auth(self) -> bool:
        return self.authenticator.required and not self.authenticated

    def complete(self) -> None:
        """The SASL exchange succeeded: the connection acts as ``User:<name>``."""
        assert self.mechanism is not None and self.mechanism.user is not None
        self.authenticated = True
        self.principal = f"User:{self.mechanism.user}"


def _rfc2253_escape(value: str) -> str:
    escaped = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def certificate_principal(peercert: Mapping[str, object] | None) -> str | None:
    """``User:`` and the RFC 2253 distinguished name of a verified client certificate.

    Kafka's default principal builder names a TLS client by its certificate's subject
    as ``X500Principal.getName()`` writes it: most specific RDN first (``CN=...,O=...``),
    with RFC 2253 escaping. ``peercert`` is :meth:`ssl.SSLSocket.getpeercert`'s answer;
    None (no certificate) gives None. Attributes without an RFC 2253 keyword keep
    Python's attribute name (Kafka would write their OID).
    """
    subject = peercert.get("subject") if peercert else None
    if not isinstance(subject, tuple) or not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append(
            "+".join(
                f"{_RFC2253_KEYWORDS.get(key, key)}={_rfc2253_escape(value)}" for key, value in rdn
            )
        )
    return "User:" + ",".join(rdns)
