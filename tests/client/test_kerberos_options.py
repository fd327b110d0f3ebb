"""Kerberos (SASL/GSSAPI) options as Spark users give them: ``kafka.sasl.jaas.config`` with
Java's ``Krb5LoginModule`` and ``kafka.sasl.kerberos.service.name``, read by the writer
(:class:`~pyspark_kafka_txn.client.kerberos.KerberosConfig`) and translated for librdkafka
(the reader), with clear errors naming the option, never the JAAS line. The exchange with a
broker is tested against Apache Kafka and a real KDC in tests/client/test_kerberos_apache.py.
"""

from __future__ import annotations

import sys

import pytest

from pyspark_kafka_txn.client.kerberos import KerberosConfig
from pyspark_kafka_txn.client.security import SecurityConfig
from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options.kafka import client_options, librdkafka_params
from pyspark_kafka_txn.options.kerberos import (
    librdkafka_has_gssapi,
    librdkafka_kerberos_settings,
)
from pyspark_kafka_txn.options.writer import parse_writer_options

MODULE = "com.sun.security.auth.module.Krb5LoginModule"
KEYTAB_JAAS = (
    f'{MODULE} required useKeyTab=true storeKey=true keyTab="/k/app.keytab" principal="app@EX.COM";'
)
GSSAPI = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}


def test_keytab_jaas_and_service_name() -> None:
    options = {**GSSAPI, "sasl.jaas.config": KEYTAB_JAAS, "sasl.kerberos.service.name": "kfk"}
    security = SecurityConfig.from_options(options)
    assert security.kerberos == KerberosConfig(
        service_name="kfk", principal="app@EX.COM", keytab="/k/app.keytab"
    )


def test_ticket_cache_jaas_and_defaults() -> None:
    jaas = f'{MODULE} required useTicketCache=true ticketCache="/tmp/cc" serviceName="svc";'
    config = KerberosConfig.from_options({**GSSAPI, "sasl.jaas.config": jaas})
    assert config == KerberosConfig(service_name="svc", ticket_cache="/tmp/cc")
    # No JAAS line: the default ticket cache, service name kafka.
    assert KerberosConfig.from_options(GSSAPI) == KerberosConfig()
    # librdkafka's own names work for the writer too.
    names = {"sasl.kerberos.keytab": "/k", "sasl.kerberos.principal": "p@R"}
    assert KerberosConfig.from_options({**GSSAPI, **names}) == KerberosConfig(
        principal="p@R", keytab="/k"
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"sasl.jaas.config": KEYTAB_JAAS}, "'kafka.sasl.mechanism'='GSSAPI'"),
        (
            {**GSSAPI, "sasl.jaas.config": KEYTAB_JAAS.replace(MODULE, "x.OtherModule")},
            "'kafka.sasl.jaas.config'",
        ),
        (
            {**GSSAPI, "sasl.jaas.config": f"{MODULE} required useKeyTab=true;"},
            "'kafka.sasl.jaas.config': useKeyTab=true needs keyTab",
        ),
        (
            {**GSSAPI, "sasl.jaas.config": f'{MODULE} required principal="app@EX.COM";'},
            "password prompt",
        ),
        ({**GSSAPI, "sasl.kerberos.service.name": ""}, "sasl.kerberos.service.name"),
    ],
)
def test_errors_name_the_option_not_the_value(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as writer:
        client_options(options, producer_options=frozenset(), ignored=frozenset())
    with pytest.raises(ConfigError) as reader:
        librdkafka_kerberos_settings(options)
    for info in (writer, reader):
        assert named in str(info.value)
        assert "/k/app.keytab" not in str(info.value)


def test_librdkafka_names() -> None:
    options = {**GSSAPI, "sasl.jaas.config": KEYTAB_JAAS, "sasl.kerberos.service.name": "kfk"}
    assert librdkafka_kerberos_settings(options) == {
        "sasl.kerberos.service.name": "kfk",
        "sasl.kerberos.keytab": "/k/app.keytab",
        "sasl.kerberos.principal": "app@EX.COM",
    }
    cache = {**GSSAPI, "sasl.jaas.config": f"{MODULE} required useTicketCache=true;"}
    assert librdkafka_kerberos_settings(cache) == {
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.min.time.before.relogin": "0",
    }
    path = {
        **GSSAPI,
        "sasl.jaas.config": f'{MODULE} required useTicketCache=true ticketCache="/c";',
    }
    with pytest.raises(
        ConfigError, match=r"ticketCache is not supported by the reader.*KRB5CCNAME"
    ):
        librdkafka_kerberos_settings(path)


def test_reader_refuses_gssapi_when_librdkafka_has_none() -> None:
    """confluent-kafka's Linux wheels carry no GSSAPI (docs/dev/kerberos.md): the reader's
    translation says so, naming the option, instead of librdkafka's "No provider" at read."""
    options = {**GSSAPI, "sasl.jaas.config": KEYTAB_JAAS}
    if librdkafka_has_gssapi():  # confluent-kafka built against a librdkafka with Cyrus SASL
        params = librdkafka_params(options, rejected={}, handled=frozenset())
        assert params["sasl.kerberos.keytab"] == "/k/app.keytab"
        assert "sasl.jaas.config" not in params
        return
    with pytest.raises(ConfigError) as info:
        librdkafka_params(options, rejected={}, handled=frozenset())
    message = str(info.value)
    assert "'kafka.sasl.mechanism'='GSSAPI'" in message and "librdkafka" in message
    assert "/k/app.keytab" not in message


def test_writer_options_keep_kerberos_settings() -> None:
    writer = parse_writer_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "topic": "t",
            **{f"kafka.{k}": v for k, v in GSSAPI.items()},
            "kafka.sasl.kerberos.service.name": "kfk",
            "kafka.sasl.jaas.config": KEYTAB_JAAS,
            # Java's ticket-renewal tuning: no counterpart, accepted with a warning.
            "kafka.sasl.kerberos.ticket.renew.window.factor": "0.8",
        }
    )
    security = writer.producer_config("t-0", 60000).connection_config().security
    assert security.sasl_mechanism == "GSSAPI"
    assert security.kerberos == KerberosConfig(
        service_name="kfk", principal="app@EX.COM", keytab="/k/app.keytab"
    )


def test_missing_gssapi_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the ``kerberos`` extra the writer's options fail at once, saying what to
    install (``sys.modules[name] = None`` makes ``import gssapi`` raise ImportError)."""
    monkeypatch.setitem(sys.modules, "gssapi", None)
    with pytest.raises(ConfigError, match=r"'gssapi' package.*pyspark-kafka-txn\[kerberos\]"):
        SecurityConfig.from_options({**GSSAPI, "sasl.jaas.config": KEYTAB_JAAS})
