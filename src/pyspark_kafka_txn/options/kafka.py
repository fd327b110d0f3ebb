"""ONE translation of the ``kafka.*`` options, shared by the reader and the writer.

Users give ``kafka_txn`` the Java-client names they give Spark's built-in connector. Two
consumers of those names exist here:

* librdkafka (confluent-kafka), which reads: :func:`librdkafka_params` translates the names
  librdkafka spells differently and drops the Java-only ones;
* our own protocol client, which writes: :func:`client_options` keeps the security
  settings (parsed by :class:`~pyspark_kafka_txn.client.security.SecurityConfig`) and the
  producer settings the client knows.

Both apply the same security rules (:func:`check_security`): the key and trust store rules
of :func:`~pyspark_kafka_txn.client.keystores.check_stores` and the JAAS translation. JKS and
PKCS12 stores keep their Java names on the way to the executors (where the store is read,
as Spark's built-in connector reads it there) and become librdkafka's in-memory PEM settings
in :func:`librdkafka_client_config`. Errors name the option with its ``kafka.`` prefix,
never a secret's value.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from pyspark_kafka_txn.client.keystores import StoreSpec, check_stores, java_stores, librdkafka_pem
from pyspark_kafka_txn.client.oauth import OAUTH_OPTIONS, OAuthConfig, librdkafka_oauth_cb
from pyspark_kafka_txn.client.security import SECURITY_OPTIONS, SecurityConfig
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.kerberos import check_kerberos, librdkafka_kerberos, uses_kerberos
from pyspark_kafka_txn.options.registry import closest

__all__ = [
    "CONSUMER_ONLY",
    "check_security",
    "client_options",
    "librdkafka_client_config",
    "librdkafka_params",
    "translate_jaas",
]

logger = logging.getLogger(__name__)

#: Java-client settings with no librdkafka counterpart that are safe to drop.
_JAVA_ONLY = frozenset(
    {
        "max.poll.records",
        "default.api.timeout.ms",
        "partition.assignment.strategy",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "sasl.login.class",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "security.providers",
        "auto.include.jmx.reporter",
        "metric.reporters",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
    }
)

#: The options of a JKS/PKCS12 trust store and key store (kept for librdkafka_client_config).
_STORE_OPTIONS = {
    "truststore": ("ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password"),
    "keystore": (
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.keystore.password",
        "ssl.key.password",
    ),
}

#: Java-client names that librdkafka spells differently.
_RENAMED = {
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
}

#: librdkafka consumer-only settings (kept out of an admin client's configuration).
CONSUMER_ONLY = frozenset(
    {
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "fetch.max.wait.ms",
        "max.partition.fetch.bytes",
        "fetch.message.max.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "check.crcs",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "group.id",
        "group.instance.id",
        "client.rack",
    }
)

_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s*(?P<args>.*?);?\s*$",
    re.DOTALL,
)
_JAAS_ARG = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')
_UNESCAPE = re.compile(r"\\(.)")
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_OPTION_NAME = re.compile(r"\b(sasl\.[\w.]+)")

_MECHANISM_OF_MODULE = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": (
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ),
}


def translate_jaas(value: str) -> dict[str, str]:
    """``sasl.jaas.config`` (PLAIN or SCRAM login module) → ``sasl.username``/``sasl.password``.

    Raises
    ------
    ConfigError
        Naming ``kafka.sasl.jaas.config`` (never its value) for other login modules or a
        configuration without both username and password.
    """
    match = _JAAS.match(value)
    if match is None or match.group("module") not in _MECHANISM_OF_MODULE:
        raise ConfigError(
            "Option 'kafka.sasl.jaas.config' is not supported with this login module: only "
            "PlainLoginModule and ScramLoginModule (username/password) translate to "
            "librdkafka; give 'kafka.sasl.username' and 'kafka.sasl.password' otherwise"
        )
    args = {
        m.group(1): m.group(2) if m.group(2) is not None else m.group(3)
        for m in _JAAS_ARG.finditer(match.group("args"))
    }
    if "username" not in args or "password" not in args:
        raise ConfigError("Option 'kafka.sasl.jaas.config' must set both username and password")
    return {
        "sasl.username": _UNESCAPE.sub(r"\1", args["username"]),
        "sasl.password": _UNESCAPE.sub(r"\1", args["password"]),
    }


def check_security(raw: Mapping[str, str]) -> dict[str, str]:
    """The security rules both translations share; returns the JAAS credentials, if any.

    Parameters
    ----------
    raw
        ``kafka.*`` options with the prefix removed.

    Returns
    -------
    dict
        ``sasl.username`` / ``sasl.password`` from ``sasl.jaas.config`` (empty without it).

    Raises
    ------
    ConfigError
        For a key or trust store that cannot be read (type, password, file, entries), an
        untranslatable JAAS config, or a ``sasl.mechanism`` that does not match the JAAS
        login module.
    """
    check_stores(raw, prefix="kafka.")
    if uses_kerberos(raw):
        check_kerberos(raw)
        return {}
    jaas = raw.get("sasl.jaas.config")
    match = _JAAS.match(jaas) if jaas is not None else None
    oauth_module = match is not None and match.group("module") == _OAUTH_MODULE
    if raw.get("sasl.mechanism", "").upper() == "OAUTHBEARER" or oauth_module:
        if raw.get("sasl.mechanism", "").upper() != "OAUTHBEARER":
            raise ConfigError(
                "Option 'kafka.sasl.jaas.config' with OAuthBearerLoginModule needs "
                "'kafka.sasl.mechanism'='OAUTHBEARER'"
            )
        _oauth_config(raw)
        return {}
    if jaas is None:
        return {}
    credentials = translate_jaas(jaas)
    if "sasl.mechanism" in raw:
        match = _JAAS.match(jaas)
        assert match is not None  # translate_jaas accepted it
        if raw["sasl.mechanism"].upper() not in _MECHANISM_OF_MODULE[match.group("module")]:
            raise ConfigError(
                "Option 'kafka.sasl.mechanism' does not match the login module of "
                "'kafka.sasl.jaas.config'"
            )
    return credentials


def librdkafka_params(
    raw: Mapping[str, str],
    *,
    rejected: Mapping[str, str],
    handled: frozenset[str],
) -> dict[str, str]:
    """Translate ``kafka.*`` options (prefix removed) into librdkafka's names.

    Parameters
    ----------
    raw
        ``kafka.*`` options with the prefix removed.
    rejected
        Names the caller refuses, with the message to raise.
    handled
        Names the caller sets itself (left out of the result).

    Returns
    -------
    dict
        librdkafka configuration.
    """
    credentials = check_security(raw)
    java_names = _java_store_names(*java_stores(raw, prefix="kafka."))
    kerberos = librdkafka_kerberos(raw) if uses_kerberos(raw) else {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key in rejected:
            raise ConfigError(rejected[key])
        if key in handled or (key == "sasl.jaas.config" and kerberos):
            continue
        if key in java_names:  # read into PEM where the client is made
            out[key] = value
            continue
        if key in ("ssl.truststore.type", "ssl.keystore.type"):  # PEM: applied below
            continue
        if key in _JAVA_ONLY:
            logger.warning("Kafka option 'kafka.%s' has no librdkafka counterpart; ignored", key)
            continue
        if key == "sasl.jaas.config" and credentials:
            out.update(credentials)
        elif key == "ssl.truststore.location":
            out["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            # A PEM key store (JKS/PKCS12 ones are kept above): the key and its
            # certificate chain in one file, which librdkafka reads as two settings (its
            # own ssl.keystore.location is a PKCS#12 file). Explicit ones win, as in
            # SecurityConfig.from_options.
            out.setdefault("ssl.certificate.location", value)
            out.setdefault("ssl.key.location", value)
        elif key == "ssl.keystore.password" and "ssl.keystore.location" in raw:
            out.setdefault("ssl.key.password", value)
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value if value else "none"
        else:
            out[_RENAMED.get(key, key)] = value
    for key, value in kerberos.items():
        out.setdefault(key, value)
    return out


def client_options(
    raw: Mapping[str, str], *, producer_options: frozenset[str], ignored: frozenset[str]
) -> dict[str, str]:
    """The ``kafka.*`` options our protocol client takes (prefix removed).

    Parameters
    ----------
    raw
        ``kafka.*`` options with the prefix removed.
    producer_options
        Producer setting names the caller passes on (besides the security ones).
    ignored
        Names accepted and dropped with a warning (Java/librdkafka tuning with no
        counterpart in our client).

    Returns
    -------
    dict
        Security and producer settings, ready for ``ProducerConfig.from_options``.

    Raises
    ------
    ConfigError
        For a name the client does not know (named with its ``kafka.`` prefix) and for
        the shared security rules of :func:`check_security`.
    """
    check_security(raw)
    out: dict[str, str] = {}
    for key, value in raw.items():
        if key in SECURITY_OPTIONS or key in producer_options:
            out[key] = value
        elif key in ignored or key in _JAVA_ONLY:
            logger.warning("Kafka option 'kafka.%s' is not used by the kafka_txn writer", key)
        else:
            likely = closest(key, SECURITY_OPTIONS | producer_options | ignored)
            raise ConfigError(
                f"Option 'kafka.{key}' is not a producer setting the kafka_txn writer "
                + (
                    f"understands: did you mean 'kafka.{likely}'?"
                    if likely is not None
                    else "understands (see docs/writer.md for the supported kafka.* options)"
                )
            )
    return out


def _oauth_config(raw: Mapping[str, str]) -> OAuthConfig:
    """The OAUTHBEARER token source of ``kafka.*`` options (prefix removed).

    Raises
    ------
    ConfigError
        Naming the options with their ``kafka.`` prefix, never a secret's value.
    """
    security = {k: v for k, v in raw.items() if k in SECURITY_OPTIONS}
    security.setdefault("security.protocol", "SASL_SSL")
    try:
        oauth = SecurityConfig.from_options(security).oauth
    except ConfigError as exc:
        raise ConfigError(_OPTION_NAME.sub(r"'kafka.\1'", str(exc))) from None
    assert oauth is not None  # sasl.mechanism is OAUTHBEARER
    return oauth


def _java_store_names(trust: StoreSpec | None, key: StoreSpec | None) -> frozenset[str]:
    """The option names of the JKS/PKCS12 stores among ``trust`` and ``key``."""
    return frozenset(
        name for spec in (trust, key) if spec is not None for name in _STORE_OPTIONS[spec.role]
    )


def _with_pem_stores(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with its JKS/PKCS12 stores read into librdkafka's in-memory PEM settings
    (``ssl.ca.pem``, ``ssl.certificate.pem``, ``ssl.key.pem``): no key material on disk."""
    names = {k: str(config[k]) for group in _STORE_OPTIONS.values() for k in group if k in config}
    if "ssl.truststore.location" not in names and "ssl.keystore.location" not in names:
        return dict(config)
    trust, key = java_stores(names, prefix="kafka.")
    java_names = _java_store_names(trust, key)
    out = {k: v for k, v in config.items() if k not in java_names}
    out.update(librdkafka_pem(trust, key))
    return out


def librdkafka_client_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A librdkafka configuration ready for confluent-kafka's clients.

    JKS and PKCS12 stores (kept under their Java names by :func:`librdkafka_params`) are
    read here, where the client is made, into ``ssl.ca.pem`` / ``ssl.certificate.pem`` /
    ``ssl.key.pem``. With ``sasl.mechanism=OAUTHBEARER`` the token source settings
    (``sasl.jaas.config``, ``sasl.oauthbearer.token.provider`` / ``.token.endpoint.url``),
    which travel to the executors as strings, become confluent-kafka's ``oauth_cb`` (the
    tokens come from :mod:`pyspark_kafka_txn.client.oauth`, as the writer's); other
    settings are returned as they are.

    Parameters
    ----------
    config
        librdkafka settings as :func:`librdkafka_params` made them, plus the caller's.

    Returns
    -------
    dict
        The settings to create a ``Consumer`` or ``AdminClient`` with.
    """
    config = _with_pem_stores(config)
    if str(config.get("sasl.mechanism", "")).upper() != "OAUTHBEARER":
        return config
    oauth = _oauth_config({k: str(v) for k, v in config.items() if k in SECURITY_OPTIONS})
    out = {k: v for k, v in config.items() if k not in OAUTH_OPTIONS and k != "sasl.jaas.config"}
    out["oauth_cb"] = librdkafka_oauth_cb(oauth)
    return out
