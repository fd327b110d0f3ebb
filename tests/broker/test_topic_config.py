"""Topic config parsing as Kafka's ``ConfigDef`` parses (no sockets).

Every expectation here was measured on Apache Kafka 4.4.0 (CreateTopics with
``validate_only``, then DescribeConfigs for the stored form).
"""

from __future__ import annotations

import pytest

from pyspark_kafka_txn.embedded.topic_config import InvalidConfigError, normalize

RATIO = "min.cleanable.dirty.ratio"


@pytest.mark.parametrize(
    ("name", "value", "stored"),
    [
        (RATIO, "1e-1", "0.1"),
        (RATIO, "0x1p-1", "0.5"),  # Java's hexadecimal floating point
        (RATIO, "0.5f", "0.5"),  # and its type suffix
        (RATIO, "\t.5\t", "0.5"),
        (RATIO, "NaN", "NaN"),  # no bound rejects NaN in Java
        ("segment.ms", " +5 ", "5"),
        ("segment.ms", "\u0661\u0662", "12"),  # Long.parseLong reads any Unicode digit
        ("preallocate", " TRUE ", "true"),
        ("cleanup.policy", "compact , delete", "compact,delete"),
        ("cleanup.policy", "", ""),
        ("follower.replication.throttled.replicas", " 0:1 , 1:2 ", "0:1,1:2"),
        ("follower.replication.throttled.replicas", "1:2,,3:4", "1:2,,3:4"),
        ("compression.type", " lz4 ", "lz4"),
        ("compression.gzip.level", " -1 ", "-1"),
    ],
)
def test_values_are_stored_as_kafka_describes_them(name: str, value: str, stored: str) -> None:
    assert normalize(name, value) == stored


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (RATIO, "1e3", "Invalid value 1000.0 for configuration {}: Value must be no more than 1"),
        (
            RATIO,
            "2147483648",
            "Invalid value 2.147483648E9 for configuration {}: Value must be no more than 1",
        ),
        (
            RATIO,
            "12345678.5",
            "Invalid value 1.23456785E7 for configuration {}: Value must be no more than 1",
        ),
        (
            RATIO,
            "-Infinity",
            "Invalid value -Infinity for configuration {}: Value must be at least 0",
        ),
        (RATIO, "inf", "Invalid value inf for configuration {}: Not a number of type DOUBLE"),
        (RATIO, "1_0", "Invalid value 1_0 for configuration {}: Not a number of type DOUBLE"),
        (
            "segment.ms",
            "\xa05",
            "Invalid value \xa05 for configuration {}: Not a number of type LONG",
        ),
        ("segment.ms", "-0", "Invalid value 0 for configuration {}: Value must be at least 1"),
        (
            "segment.bytes",
            "2147483648",
            "Invalid value 2147483648 for configuration {}: Not a number of type INT",
        ),
        (
            "compression.lz4.level",
            "0",
            "Invalid value 0 for configuration {}: Value must be at least 1",
        ),
        ("cleanup.policy", ",shred", "Configuration '{}' values must not be empty."),
        (
            "cleanup.policy",
            "shred,,delete",
            "Invalid value shred for configuration {}: String must be one of: compact, delete",
        ),
        (
            "compression.type",
            " LZ4 ",
            "Invalid value LZ4 for configuration {}: String must be one of: uncompressed, "
            "zstd, lz4, snappy, gzip, producer",
        ),
    ],
)
def test_refusals_are_worded_as_kafka_words_them(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError) as refused:
        normalize(name, value)
    assert str(refused.value) == message.format(name)
