"""The option registry drives parsing: every attribute has one source, every default parses.

The expected values below are written out here (Spark's documented defaults and ours), not
read from the code under test.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options import parse_reader_options, parse_writer_options
from pyspark_kafka_txn.options.reader import OffsetBound, ReaderOptions, Subscribe
from pyspark_kafka_txn.options.registry import (
    GROUPS,
    OPTIONS,
    PASS_THROUGH,
    client_defaults,
    default,
    kafka_rows,
)
from pyspark_kafka_txn.options.writer import WriterOptions

READ = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}
WRITE = {"kafka.bootstrap.servers": "h:9092", "topic": "out"}

#: Attributes filled by hand, not by one registry row or group.
SPANNING = {
    ReaderOptions: {"group_id"},
    WriterOptions: set(),
}


def test_every_default_parses() -> None:
    for row in OPTIONS:
        if row.parser is not None and row.default is not None:
            row.parser(row.default)  # raises when a default is not a valid value
        if row.batch_default is not None:
            parser = row.parser_for(streaming=False)
            assert parser is not None
            parser(row.batch_default)


@pytest.mark.parametrize(("target", "side"), [(ReaderOptions, "reader"), (WriterOptions, "writer")])
def test_every_attribute_has_exactly_one_source(target: type, side: str) -> None:
    by_rows = [r.field for r in OPTIONS if r.field and r.parser and r.scope in (side, "both")]
    by_rows += [g.field for g in GROUPS if side == "reader"]
    names = {f.name for f in fields(target)}
    filled = set(by_rows) & names
    assert len(by_rows) == len(set(by_rows)), "two rows fill one attribute"
    kafka_settings = {"kafka_params"} if side == "reader" else {"client_options"}
    assert filled | SPANNING[target] | kafka_settings == names
    assert not filled & SPANNING[target]


def test_every_option_of_the_reader_is_parsed_by_the_registry() -> None:
    """Every reader row has a parser, but the ``kafka.*`` ones the Kafka client reads."""
    grouped = {name for group in GROUPS for name in group.names}
    for row in OPTIONS:
        if row.applies_to("reader") and not row.name.startswith("kafka."):
            assert row.parser is not None, row.name
        if row.name in grouped:
            assert row.parser is not None and row.field is None, row.name


def test_the_pass_through_says_what_becomes_of_every_documented_kafka_setting() -> None:
    writer = PASS_THROUGH["writer"]
    assert writer.passed is not None
    documented = {
        r.name.removeprefix("kafka.")
        for r in OPTIONS
        if r.applies_to("writer") and r.name.startswith("kafka.") and "\\*" not in r.name
    }
    # Each documented kafka.* option of the writer is parsed by its row or passed to the client.
    assert documented <= kafka_rows("writer") | writer.passed
    assert writer.integers <= writer.passed
    for side in ("reader", "writer"):
        kafka = PASS_THROUGH[side]
        refused = set(kafka.rejected) | set(kafka.fixed)
        assert not refused & (kafka_rows(side) | kafka.read | (kafka.passed or set()))
    assert kafka_rows("reader") == {"bootstrap.servers", "isolation.level"}
    assert kafka_rows("writer") == {
        "bootstrap.servers",
        "transaction.timeout.ms",
        "transaction.two.phase.commit.enable",
        "max.block.ms",
    }


def test_reader_defaults_are_spark_defaults() -> None:
    opts = parse_reader_options(READ, streaming=True)
    assert opts.subscription == Subscribe(("t",))
    assert opts.starting is OffsetBound.LATEST and opts.ending is None
    assert parse_reader_options(READ, streaming=False).starting is OffsetBound.EARLIEST
    assert parse_reader_options(READ, streaming=False).ending is OffsetBound.LATEST
    assert opts.max_trigger_delay_ms == 15 * 60 * 1000
    assert opts.poll_timeout_ms == 120_000
    assert (opts.fetch_offset_num_retries, opts.fetch_offset_retry_interval_ms) == (3, 1000)
    assert opts.group_id_prefix == "spark-kafka-source" and opts.group_id is None
    assert opts.fail_on_data_loss is True and opts.include_headers is False
    assert opts.isolation_level == "read_committed"  # ours; Spark's is read_uncommitted
    assert opts.timestamp_strategy_latest is False
    assert opts.lso_stall_warn_ms == 60_000
    assert opts.max_offsets_per_trigger is None and opts.min_partitions is None


def test_writer_defaults() -> None:
    opts = parse_writer_options(WRITE)
    assert opts.transactional_id_prefix == "spark-kafka-txn-"
    assert opts.exactly_once is True and opts.two_phase_commit == "auto"
    assert opts.transaction_timeout_ms is None
    assert opts.lingering_timeout_ms == 60_000 and opts.max_block_ms == 60_000
    config = opts.producer_config("p-q-0", 60_000)
    assert (config.batch_size, config.linger_ms, config.max_in_flight) == (1_000_000, 0, 5)
    assert config.transaction_version == 0  # follows the cluster unless forced
    assert client_defaults()["transaction.version"] == "0"


def test_a_default_is_the_value_of_its_text() -> None:
    assert default("maxTriggerDelay") == 15 * 60 * 1000
    assert default("deliveryGuarantee") is True


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"maxTriggerDelay": "soon"},
            "Invalid value 'soon' for option 'maxTriggerDelay', must be a duration",
        ),
        (
            {"minPartitions": "0"},
            "Invalid value '0' for option 'minPartitions', must be a positive integer",
        ),
        (
            {"failOnDataLoss": "yes"},
            "Invalid value 'yes' for option 'failOnDataLoss', must be true or false",
        ),
        (
            {"kafka.isolation.level": "dirty"},
            "option 'kafka.isolation.level', must be read_committed or read_uncommitted",
        ),
        ({"groupIdPrefix": ""}, "option 'groupIdPrefix', must not be empty"),
    ],
)
def test_reader_values_fail_naming_the_option(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_reader_options({**READ, **given}, streaming=True)
    assert message in str(caught.value)


def test_an_empty_prefix_is_refused() -> None:
    # An empty prefix would put the writer's lingering clean-up over every transactional id
    # of the cluster; `kafka-txn abort --prefix ""` is refused for the same reason.
    with pytest.raises(ConfigError, match="option 'transactionalIdPrefix', must not be empty"):
        parse_writer_options({**WRITE, "transactionalIdPrefix": ""})


def test_a_long_value_is_shortened_in_the_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_writer_options({**WRITE, "transactionalIdPrefix": "p" * 40_000})
    text = str(caught.value)
    assert "must be at most" in text and "(is 40000)" in text and len(text) < 400
