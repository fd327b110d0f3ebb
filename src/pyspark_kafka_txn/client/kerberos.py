"""SASL/GSSAPI (Kerberos V5, RFC 4752) for client connections.

Options use Kafka's names (``kafka.`` prefix removed): ``sasl.mechanism=GSSAPI``,
``sasl.kerberos.service.name`` (the first part of the brokers' principal, usually
``kafka``) and ``sasl.jaas.config`` with Java's ``Krb5LoginModule``::

    com.sun.security.auth.module.Krb5LoginModule required
        useKeyTab=true keyTab="/etc/security/keytabs/app.keytab" principal="app@EXAMPLE.COM";

or ``useTicketCache=true`` (with ``ticketCache="/path"``, else the default cache of
``KRB5CCNAME``). Without a JAAS config the default credentials are used (a ticket cache
filled by ``kinit``). librdkafka's ``sasl.kerberos.keytab`` and ``sasl.kerberos.principal``
are accepted too.

Credentials come from MIT Kerberos through the ``gssapi`` package (the ``kerberos`` extra):
with a keytab, tickets are kept in a process-wide in-memory cache and fetched again from the
keytab when they expire, so long-running writers and KIP-368 re-authentications keep
working; nothing is written to disk. The realm's KDCs come from ``krb5.conf`` (``/etc/krb5.conf``
or ``KRB5_CONFIG``).

The exchange (Kafka's SaslAuthenticate rounds carry the tokens): GSS-API context
establishment with the service ``<service name>@<broker host>`` and mutual authentication;
then the broker sends a wrapped 4-byte offer (the security layers it supports and its
largest message), which the client answers, wrapped, choosing "no security layer" (Kafka
protects connections with TLS, never with a SASL layer).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark_kafka_txn.client.errors import AuthenticationError, ConfigError

if TYPE_CHECKING:
    import gssapi

__all__ = [
    "GSSAPI",
    "KERBEROS_OPTIONS",
    "KRB5_MODULE",
    "GssapiSession",
    "KerberosConfig",
    "parse_krb5_jaas",
    "require_gssapi",
]

logger = logging.getLogger(__name__)

#: The SASL mechanism name.
GSSAPI = "GSSAPI"
#: Java's Kerberos login module (the only one :func:`parse_krb5_jaas` takes).
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
#: Option names read by :meth:`KerberosConfig.from_options` (besides ``sasl.jaas.config``).
KERBEROS_OPTIONS = frozenset(
    {
        "sasl.kerberos.service.name",
        "sasl.kerberos.keytab",
        "sasl.kerberos.principal",
        # librdkafka's ticket refresh; the writer's library refreshes from the keytab itself.
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
    }
)

_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\b")
_ARG = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_UNESCAPE = re.compile(r"\\(.)")
#: RFC 4752 3.1: the security-layer bit for "no security layer".
_NO_SECURITY_LAYER = 0x01


def parse_krb5_jaas(value: str) -> dict[str, str]:
    """The arguments of a ``Krb5LoginModule`` line of ``sasl.jaas.config``.

    Raises
    ------
    ConfigError
        Naming ``sasl.jaas.config`` for another login module, or for options that ask
        for something this client does not do (``useKeyTab=true`` without ``keyTab``,
        ``useKeyTab`` and ``useTicketCache`` both false).
    """
    match = _JAAS.match(value)
    if match is None or match.group("module") != KRB5_MODULE:
        raise ConfigError(f"sasl.jaas.config with sasl.mechanism=GSSAPI must use {KRB5_MODULE}")
    args = {
        m.group(1): _UNESCAPE.sub(r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _ARG.finditer(value[match.end() :])
    }
    use_keytab = args.get("useKeyTab", "false").lower() == "true"
    use_cache = args.get("useTicketCache", "false").lower() == "true"
    if use_keytab and not args.get("keyTab"):
        raise ConfigError('sasl.jaas.config: useKeyTab=true needs keyTab="<path>"')
    if not use_keytab and not use_cache:
        raise ConfigError(
            "sasl.jaas.config: Krb5LoginModule needs useKeyTab=true (with keyTab and "
            "principal) or useTicketCache=true: a password prompt is not possible here"
        )
    return args


@dataclass(frozen=True)
class KerberosConfig:
    """Where the Kerberos credentials come from, and whom to authenticate to.

    Attributes
    ----------
    service_name
        The brokers' service name (``kafka`` in ``kafka/broker1.example.com@REALM``).
    principal
        The client's principal (None: the one in the keytab or ticket cache).
    keytab
        A keytab to get tickets from (a path; the keys stay in the file).
    ticket_cache
        A ticket cache (``FILE:...`` or a path) to use instead of the default one.
    """

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = None
    ticket_cache: str | None = None

    def __post_init__(self) -> None:
        if not self.service_name:
            raise ConfigError("sasl.kerberos.service.name must not be empty")

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KerberosConfig:
        """From ``sasl.jaas.config`` (``Krb5LoginModule``), ``sasl.kerberos.service.name``
        (else the JAAS ``serviceName``, else ``kafka``) and librdkafka's
        ``sasl.kerberos.keytab`` / ``sasl.kerberos.principal``.

        Raises
        ------
        ConfigError
            See :func:`parse_krb5_jaas`; never shows the JAAS line.
        """
        jaas = options.get("sasl.jaas.config")
        args = parse_krb5_jaas(jaas) if jaas else {}
        use_keytab = args.get("useKeyTab", "false").lower() == "true"
        keytab = args.get("keyTab") if use_keytab else options.get("sasl.kerberos.keytab")
        cache = None
        if args.get("useTicketCache", "false").lower() == "true" and not use_keytab:
            cache = args.get("ticketCache")
        service = options.get("sasl.kerberos.service.name", args.get("serviceName", "kafka"))
        return cls(
            service_name=service.strip(),
            principal=args.get("principal") or options.get("sasl.kerberos.principal"),
            keytab=keytab or None,
            ticket_cache=cache,
        )


def require_gssapi() -> None:
    """Check that the ``gssapi`` package (the ``kerberos`` extra) can be imported.

    Raises
    ------
    ConfigError
        Saying what to install.
    """
    try:
        import gssapi  # noqa: F401
    except ImportError:
        raise ConfigError(
            "sasl.mechanism=GSSAPI needs the 'gssapi' package (pip install "
            "'pyspark-kafka-txn[kerberos]'; building it needs MIT Kerberos' development "
            "files, e.g. Debian's libkrb5-dev)"
        ) from None


def _credentials(config: KerberosConfig) -> gssapi.Credentials:
    """The initiator's credentials: from the keytab (cached in memory), a ticket cache,
    or the defaults."""
    import gssapi

    name = (
        gssapi.Name(config.principal, gssapi.NameType.kerberos_principal)
        if config.principal
        else None
    )
    store: dict[str | bytes, str | bytes] | None = None
    if config.keytab:
        # One in-memory cache per (keytab, principal) and process: tickets are reused by
        # every connection, and MIT Kerberos gets new ones from the keytab when they expire.
        key = hashlib.sha256(f"{config.keytab}\0{config.principal}".encode()).hexdigest()[:16]
        store = {"client_keytab": config.keytab, "ccache": f"MEMORY:kafka-txn-{key}"}
    elif config.ticket_cache:
        store = {"ccache": config.ticket_cache}
    return gssapi.Credentials(name=name, usage="initiate", store=store)


class GssapiSession:
    """The client side of one SASL GSSAPI authentication (RFC 4752) with one broker.

    Parameters
    ----------
    config
        Credentials and service name.
    host
        The broker's host as the client reached it (the service principal's host part).

    Raises
    ------
    AuthenticationError
        From :meth:`first_token` and :meth:`respond` when Kerberos fails (no ticket, an
        unknown service principal, a KDC out of reach), with MIT Kerberos' message.
    """

    def __init__(self, config: KerberosConfig, host: str) -> None:
        self._config = config
        self._host = host
        self._context: gssapi.SecurityContext | None = None
        self._done = False

    def _fail(self, exc: Exception) -> AuthenticationError:
        detail = exc.gen_message() if hasattr(exc, "gen_message") else str(exc)
        return AuthenticationError(
            f"SASL GSSAPI (Kerberos) to {self._config.service_name}@{self._host}: {detail}"
        )

    def first_token(self) -> bytes:
        """The first context-establishment token (a Kerberos AP-REQ)."""
        require_gssapi()
        import gssapi
        from gssapi.raw.misc import GSSError

        try:
            target = gssapi.Name(
                f"{self._config.service_name}@{self._host}", gssapi.NameType.hostbased_service
            )
            flags = gssapi.RequirementFlag
            self._context = gssapi.SecurityContext(
                name=target,
                creds=_credentials(self._config),
                usage="initiate",
                flags=flags.mutual_authentication
                | flags.integrity
                | flags.out_of_sequence_detection,
            )
            token = self._context.step()
        except GSSError as exc:
            raise self._fail(exc) from None
        return token or b""

    def respond(self, challenge: bytes) -> bytes | None:
        """The client's answer to the broker's ``challenge``; None once authenticated."""
        from gssapi.raw.misc import GSSError

        context = self._context
        assert context is not None, "first_token() comes first"
        if self._done:
            return None
        try:
            if not context.complete:
                token = context.step(challenge)
                # Established: an empty answer asks the broker for its security-layer offer.
                return token or b""
            offer = context.unwrap(challenge).message
        except GSSError as exc:
            raise self._fail(exc) from None
        if len(offer) != 4:
            raise AuthenticationError(
                f"SASL GSSAPI to {self._host}: the broker's security-layer offer has "
                f"{len(offer)} bytes, not 4"
            )
        if not offer[0] & _NO_SECURITY_LAYER:
            raise AuthenticationError(
                f"SASL GSSAPI to {self._host}: the broker requires a SASL security layer "
                "(integrity or confidentiality), which Kafka clients do not use"
            )
        self._done = True
        # No security layer, so no maximum message size; no authorization identity (the
        # broker uses the authenticated principal).
        try:
            return bytes(context.wrap(bytes([_NO_SECURITY_LAYER, 0, 0, 0]), False).message)
        except GSSError as exc:
            raise self._fail(exc) from None
