"""The ``kafka.*`` Kerberos (SASL/GSSAPI) options, for the writer's client and for librdkafka.

Users give what Spark's Kafka connector takes: ``kafka.sasl.mechanism=GSSAPI``,
``kafka.sasl.kerberos.service.name`` and ``kafka.sasl.jaas.config`` with Java's
``Krb5LoginModule`` (``useKeyTab=true keyTab="..." principal="..."``, or
``useTicketCache=true``). :func:`check_kerberos` applies the rules both sides share
(:class:`~pyspark_kafka_txn.client.kerberos.KerberosConfig` parses them for the writer);
:func:`librdkafka_kerberos` turns them into librdkafka's ``sasl.kerberos.*`` settings for the
reader, and refuses them when the librdkafka that confluent-kafka loaded has no GSSAPI, as
the Linux wheels on PyPI do (librdkafka's GSSAPI needs Cyrus SASL and MIT Kerberos, which
the wheels do not bundle; see docs/dev/kerberos.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from pyspark_kafka_txn.client.kerberos import GSSAPI, KRB5_MODULE, KerberosConfig, parse_krb5_jaas
from pyspark_kafka_txn.errors import ConfigError

__all__ = [
    "check_kerberos",
    "librdkafka_has_gssapi",
    "librdkafka_kerberos",
    "librdkafka_kerberos_settings",
    "uses_kerberos",
]

_OPTION_NAME = re.compile(r"\b(sasl\.[\w.]+)")
_MODULE = re.compile(r"^\s*([\w.$]+)")


def uses_kerberos(raw: Mapping[str, str]) -> bool:
    """Whether ``sasl.mechanism`` is GSSAPI or ``sasl.jaas.config`` uses Krb5LoginModule."""
    jaas = _MODULE.match(raw.get("sasl.jaas.config", ""))
    return raw.get("sasl.mechanism", "").upper() == GSSAPI or (
        jaas is not None and jaas.group(1) == KRB5_MODULE
    )


def check_kerberos(raw: Mapping[str, str]) -> KerberosConfig:
    """The Kerberos settings of ``kafka.*`` options (prefix removed).

    Raises
    ------
    ConfigError
        Naming the option with its ``kafka.`` prefix (never the JAAS line): a
        ``Krb5LoginModule`` without ``sasl.mechanism=GSSAPI``, another login module with
        GSSAPI, or Krb5LoginModule options this package cannot follow.
    """
    if raw.get("sasl.mechanism", "").upper() != GSSAPI:
        raise ConfigError(
            f"Option 'kafka.sasl.jaas.config' with Krb5LoginModule needs "
            f"'kafka.sasl.mechanism'='{GSSAPI}'"
        )
    try:
        return KerberosConfig.from_options(raw)
    except ConfigError as exc:
        raise ConfigError(_OPTION_NAME.sub(r"'kafka.\1'", str(exc))) from None


@functools.cache
def librdkafka_has_gssapi() -> bool:
    """Whether the librdkafka confluent-kafka loaded was built with SASL GSSAPI.

    Asked by creating (and closing) a consumer with ``sasl.mechanism=GSSAPI``, which
    librdkafka refuses at once ("No provider for SASL mechanism GSSAPI") when built without
    it; ``sasl.kerberos.min.time.before.relogin=0`` keeps a build with it from running kinit.
    """
    from confluent_kafka import Consumer, KafkaException

    try:
        Consumer(
            {
                "group.id": "kafka-txn-gssapi-probe",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": GSSAPI,
                "sasl.kerberos.min.time.before.relogin": 0,
                "log_level": 0,
            }
        ).close()
    except KafkaException as exc:
        if f"No provider for SASL mechanism {GSSAPI}" in str(exc):
            return False
        raise
    return True


def librdkafka_kerberos(raw: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's settings for the Kerberos options of ``raw`` (the reader's side), if the
    librdkafka confluent-kafka loaded has GSSAPI: :func:`librdkafka_kerberos_settings`.

    Raises
    ------
    ConfigError
        When it has none (confluent-kafka's Linux wheels), naming ``kafka.sasl.mechanism``
        and what to install; and as :func:`librdkafka_kerberos_settings`.
    """
    settings = librdkafka_kerberos_settings(raw)
    if not librdkafka_has_gssapi():
        raise ConfigError(
            f"Option 'kafka.sasl.mechanism'='{GSSAPI}' (Kerberos) is not supported by the "
            "reader with this confluent-kafka: its librdkafka was built without SASL GSSAPI "
            "(confluent-kafka's Linux wheels never include it). Install confluent-kafka from "
            "source against a librdkafka built with Cyrus SASL (libsasl2) and MIT Kerberos "
            "(see 'Kerberos' in docs/sign-in.md), or sign the reader in with another SASL "
            "mechanism"
        )
    return settings


def librdkafka_kerberos_settings(raw: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's names for the Kerberos options of ``raw``.

    ``Krb5LoginModule``'s ``keyTab`` and ``principal`` become ``sasl.kerberos.keytab`` and
    ``sasl.kerberos.principal`` (librdkafka runs ``kinit`` with them, its
    ``sasl.kerberos.kinit.cmd``); ``useTicketCache=true`` without a keytab turns librdkafka's
    kinit off (``sasl.kerberos.min.time.before.relogin=0``) so the default ticket cache is
    used; the service name is ``sasl.kerberos.service.name``.

    Raises
    ------
    ConfigError
        For a ``ticketCache`` path, which librdkafka cannot be told (it reads
        ``KRB5CCNAME``), and as :func:`check_kerberos`.
    """
    config = check_kerberos(raw)
    jaas = raw.get("sasl.jaas.config")
    args = parse_krb5_jaas(jaas) if jaas else {}
    if config.ticket_cache is not None:
        raise ConfigError(
            "Option 'kafka.sasl.jaas.config': ticketCache is not supported by the reader "
            "(librdkafka reads the ticket cache named by the KRB5CCNAME environment "
            "variable); set KRB5CCNAME on the executors and leave ticketCache out"
        )
    out = {"sasl.kerberos.service.name": config.service_name}
    if config.keytab:
        out["sasl.kerberos.keytab"] = config.keytab
    if config.principal:
        out["sasl.kerberos.principal"] = config.principal
    if args.get("useTicketCache", "false").lower() == "true" and not config.keytab:
        out["sasl.kerberos.min.time.before.relogin"] = "0"
    return out
