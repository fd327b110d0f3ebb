"""Writer options and ids: parsed on the driver, errors name the option as written."""

from __future__ import annotations

import uuid

import pytest

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options import parse_writer_options
from pyspark_kafka_txn.writer.ids import query_of, transactional_id

BASE = {"kafka.bootstrap.servers": "h:9092", "topic": "out"}
SECRET = "s3cr3t-do-not-show"


def test_defaults() -> None:
    opts = parse_writer_options(BASE)
    assert opts.exactly_once and opts.two_phase_commit == "auto"
    assert opts.transactional_id_prefix == "spark-kafka-txn-"
    assert opts.transaction_timeout_ms is None and opts.topic == "out"


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
        ({"Kafka.Transaction.Timeout.Ms": "0"}, "Kafka.Transaction.Timeout.Ms"),
        ({"kafka.transaction.timeout.ms": "soon"}, "kafka.transaction.timeout.ms"),
        ({"deliveryGuarantee": "maybe"}, "deliveryGuarantee"),
        ({"kafka.transaction.two.phase.commit.enable": "x"}, "two.phase.commit.enable"),
        ({"transactionalIdPrefix": "a b"}, "transactionalIdPrefix"),
        ({"kafka.transactional.id": "x"}, "transactionalIdPrefix"),
        ({"kafka.key.serializer": "x"}, "kafka.key.serializer"),
        ({"kafka.enable.idempotence": "false"}, "kafka.enable.idempotence"),
        ({"kafka.acks": "1"}, "kafka.acks"),
        ({"kafka.batch.size": "big"}, "kafka.batch.size"),
        ({"kafka.no.such.setting": "1"}, "kafka.no.such.setting"),
        ({"kafka.ssl.truststore.location": "/ts.jks"}, "kafka.ssl.truststore.location"),
        ({"lingeringTransactionTimeout": "later"}, "lingeringTransactionTimeout"),
        ({"includeHeaders": "yes"}, "includeHeaders"),
        ({"topic": " "}, "topic"),
    ],
)
def test_bad_options_name_the_option(given: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_writer_options({**BASE, **given})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"kafka.max.in.flight.requests.per.connection": "6"},
            "kafka.max.in.flight.requests.per.connection must be between 1 and 5 "
            "(idempotence), got 6",
        ),
        ({"kafka.transaction.version": "5"}, "kafka.transaction.version must be 0, 1 or 2, got 5"),
        (
            {"kafka.compression.type": "brotli"},
            "kafka.compression.type must be one of none, gzip, snappy, lz4, zstd; got 'brotli'",
        ),
        ({"Kafka.Batch.Size": "0"}, "Kafka.Batch.Size must be positive, got 0"),
        ({"kafka.max.request.size": "0"}, "kafka.max.request.size must be positive, got 0"),
    ],
    ids=["max-in-flight", "transaction-version", "compression", "batch-size", "request-size"],
)
def test_producer_config_errors_name_the_option_as_written(
    given: dict[str, str], message: str
) -> None:
    """ProducerConfig's errors carry the option; the writer names it with ``kafka.``."""
    with pytest.raises(ConfigError) as info:
        parse_writer_options({**BASE, **given})
    assert str(info.value) == message
    assert info.value.option == next(iter(given))


def test_secrets_never_shown() -> None:
    opts = parse_writer_options(
        {
            **BASE,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule"
            f' required username="u" password="{SECRET}";',
        }
    )
    assert SECRET not in repr(opts) and SECRET not in str(opts)
    assert opts.security().password == SECRET


def test_query_of_inverts_transactional_id() -> None:
    query = str(uuid.uuid4())
    assert query_of("p-", transactional_id("p-", query, 7)) == query
    assert query_of("p-", transactional_id("p-", f"job-{query}", 0)) == f"job-{query}"
    assert query_of("p-", f"p-x-{query}-1") is None  # a longer prefix is not ours
    assert query_of("p-", f"q-{query}-1") is None
    assert query_of("p-", f"p-{query}-decision") is None
