"""The subscription and offsets options, parsed by their registry rows and groups.

Each parser's accepted and refused texts (the refusal names the option as documented, in
Spark's words), the rules of the registry's groups, and the required option. The expected
values and messages are written out here, not read from the code under test.
"""

from __future__ import annotations

import pytest

from pyspark_kafka_txn.errors import ConfigError
from pyspark_kafka_txn.options import parse_reader_options, parse_writer_options
from pyspark_kafka_txn.options.common import OptionView
from pyspark_kafka_txn.options.registry import OPTIONS, option, required_value
from pyspark_kafka_txn.options.specs import (
    Assign,
    GlobalTimestamp,
    OffsetBound,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
)
from pyspark_kafka_txn.options.values import RefusedValueError
from pyspark_kafka_txn.wire import TopicPartition

SERVERS = {"kafka.bootstrap.servers": "h:9092"}
READ = {**SERVERS, "subscribe": "t"}


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def parsed(name: str, text: str, *, streaming: bool = True) -> object:
    """``text`` parsed by the row of ``name`` (a batch read's parser when not streaming)."""
    parser = option(name).parser_for(streaming=streaming)
    assert parser is not None
    return parser(text)


def refusal(name: str, text: str, *, streaming: bool = True) -> str:
    """The message the row of ``name`` refuses ``text`` with, naming the option."""
    with pytest.raises(RefusedValueError) as caught:
        parsed(name, text, streaming=streaming)
    return caught.value.naming(name)


# --------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("assign", '{"a":[0,1],"b":[2]}', Assign((tp("a", 0), tp("a", 1), tp("b", 2)))),
        ("assign", '{"a":[],"b":[3]}', Assign((tp("b", 3),))),
        ("subscribe", " a, b ,,c ", Subscribe(("a", "b", "c"))),
        ("subscribe", "t", Subscribe(("t",))),
        ("subscribePattern", " t-.* ", SubscribePattern("t-.*")),
        ("startingOffsets", " Earliest ", OffsetBound.EARLIEST),
        ("startingOffsets", "LATEST", OffsetBound.LATEST),
        ("startingOffsets", '{"t":{"0":23,"1":-2,"2":-1}}', None),
        ("startingOffsetsByTimestamp", '{"t":{"0":1000}}', SpecificTimestamps({tp("t", 0): 1000})),
        ("startingTimestamp", " 7 ", GlobalTimestamp(7)),
        ("startingTimestamp", "0", GlobalTimestamp(0)),
        ("endingOffsets", "latest", OffsetBound.LATEST),
        ("endingOffsets", '{"t":{"0":5,"1":-1}}', SpecificOffsets({tp("t", 0): 5, tp("t", 1): -1})),
        ("endingOffsetsByTimestamp", '{"t":{"1":0}}', SpecificTimestamps({tp("t", 1): 0})),
        ("endingTimestamp", "5000", GlobalTimestamp(5000)),
    ],
)
def test_each_parser_accepts(name: str, text: str, value: object) -> None:
    if value is None:
        value = SpecificOffsets({tp("t", 0): 23, tp("t", 1): -2, tp("t", 2): -1})
    assert parsed(name, text) == value


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "assign",
            "[0]",
            "Invalid value for option 'assign': expected a JSON object",
        ),
        (
            "assign",
            "nojson",
            "Invalid value for option 'assign': expected JSON like "
            '{"topicA":{"0":23,"1":-1}}, got \'nojson\' (Expecting value)',
        ),
        (
            "assign",
            '{"a":[true]}',
            "Invalid value for option 'assign': expected {\"topicA\":[0,1]}, got '{\"a\":[true]}'",
        ),
        (
            "assign",
            "{}",
            "No topic-partitions to assign as specified value for option 'assign' is '{}'",
        ),
        (
            "subscribe",
            " , ",
            "No topics to subscribe to as specified value for option 'subscribe' is ' , '",
        ),
        (
            "subscribePattern",
            "  ",
            "Pattern to subscribe is empty as specified value for option 'subscribePattern' "
            "is '  '",
        ),
        (
            "subscribePattern",
            "(",
            "Invalid value for option 'subscribePattern': missing ), unterminated subpattern "
            "at position 0",
        ),
        (
            "startingOffsets",
            "bogus",
            "Invalid value for option 'startingOffsets': expected JSON like "
            '{"topicA":{"0":23,"1":-1}}, got \'bogus\' (Expecting value)',
        ),
        (
            "startingOffsets",
            '{"t":[0]}',
            'Invalid value for option \'startingOffsets\': expected {"topic":{"partition":'
            "offset}}, got '{\"t\":[0]}'",
        ),
        (
            "startingOffsets",
            '{"t":{"x":1}}',
            "Invalid value for option 'startingOffsets': partition 'x' is not a number",
        ),
        (
            "startingOffsets",
            '{"t":{"0":true}}',
            "Invalid value for option 'startingOffsets': t-0 must be an integer",
        ),
        (
            "startingOffsets",
            '{"t":{"0":-3}}',
            "Invalid value for option 'startingOffsets': offset -3 of t-0 (use -2 for "
            "earliest, -1 for latest)",
        ),
        (
            "startingOffsetsByTimestamp",
            '{"t":{"0":-1}}',
            "Invalid value for option 'startingOffsetsByTimestamp': timestamps must be >= 0",
        ),
        (
            "startingTimestamp",
            "yesterday",
            "Invalid value 'yesterday' for option 'startingTimestamp', must be a timestamp in "
            "milliseconds since the epoch",
        ),
        (
            "startingTimestamp",
            "-1",
            "Invalid value '-1' for option 'startingTimestamp', must be a timestamp in "
            "milliseconds since the epoch",
        ),
        (
            "endingOffsets",
            "earliest",
            "Option 'endingOffsets': ending offset can't be earliest for batch queries on Kafka",
        ),
        (
            "endingOffsets",
            '{"t":{"0":5,"1":-2}}',
            "Option 'endingOffsets': ending offset for t-1 can't be earliest (-2) for batch "
            "queries on Kafka",
        ),
        (
            "endingOffsetsByTimestamp",
            "{bad",
            "Invalid value for option 'endingOffsetsByTimestamp': expected JSON like "
            '{"topicA":{"0":23,"1":-1}}, got \'{bad\' (Expecting property name enclosed in '
            "double quotes)",
        ),
        (
            "endingTimestamp",
            "1.5",
            "Invalid value '1.5' for option 'endingTimestamp', must be a timestamp in "
            "milliseconds since the epoch",
        ),
    ],
)
def test_each_parser_refuses_naming_the_option(name: str, text: str, message: str) -> None:
    assert refusal(name, text) == message


def test_a_batch_read_starts_neither_at_latest_nor_at_minus_one() -> None:
    assert parsed("startingOffsets", "latest") is OffsetBound.LATEST  # a stream may
    assert refusal("startingOffsets", " latest", streaming=False) == (
        "Option 'startingOffsets': starting offset can't be latest for batch queries on Kafka"
    )
    assert refusal("startingOffsets", '{"t":{"0":-1}}', streaming=False) == (
        "Option 'startingOffsets': starting offset for t-0 can't be latest (-1) for batch "
        "queries on Kafka"
    )
    # The partitions are checked in their order: the first bad one is named.
    assert "offset for t-0 can't be latest" in refusal(
        "startingOffsets", '{"t":{"0":-1,"1":-5}}', streaming=False
    )


def test_a_refusal_through_the_view_keeps_its_sentence_and_the_documented_name() -> None:
    """Spark lower-cases the names it passes; the message names the option as documented."""
    view = OptionView({"subscribepattern": ""})
    parser = option("subscribePattern").parser
    assert parser is not None
    with pytest.raises(ConfigError) as caught:
        view.parse("subscribePattern", parser)
    assert str(caught.value) == (
        "Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''"
    )


# --------------------------------------------------------------------------- groups


def test_the_defaults_of_the_offsets_come_from_their_rows() -> None:
    assert option("startingOffsets").default_for(streaming=True) == "latest"
    assert option("startingOffsets").default_for(streaming=False) == "earliest"
    assert option("endingOffsets").default_for(streaming=False) == "latest"
    stream = parse_reader_options(READ, streaming=True)
    batch = parse_reader_options(READ, streaming=False)
    assert (stream.starting, stream.ending) == (OffsetBound.LATEST, None)
    assert (batch.starting, batch.ending) == (OffsetBound.EARLIEST, OffsetBound.LATEST)


@pytest.mark.parametrize("prefix", ["starting", "ending"])
def test_the_last_given_offsets_option_wins_and_the_others_are_not_parsed(prefix: str) -> None:
    given = {
        f"{prefix}Offsets": "garbage",
        f"{prefix}OffsetsByTimestamp": "garbage",
        f"{prefix}Timestamp": "7",
    }
    opts = parse_reader_options({**READ, **given}, streaming=False)
    assert getattr(opts, prefix) == GlobalTimestamp(7)
    del given[f"{prefix}Timestamp"]
    given[f"{prefix}OffsetsByTimestamp"] = '{"t":{"0":1}}'
    opts = parse_reader_options({**READ, **given}, streaming=False)
    assert getattr(opts, prefix) == SpecificTimestamps({tp("t", 0): 1})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {},
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details.",
        ),
        (
            {"subscribePattern": "x", "subscribe": "t", "assign": "{}"},
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribePattern, assign (got assign, subscribe, subscribePattern). See the docs "
            "for more details.",
        ),
    ],
)
def test_exactly_one_subscription_option(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_reader_options({**SERVERS, **given}, streaming=True)
    assert str(caught.value) == message


def test_one_subscription_option_in_any_case() -> None:
    opts = parse_reader_options({**SERVERS, "ASSIGN": '{"a":[1]}'}, streaming=True)
    assert opts.subscription == Assign((tp("a", 1),))


@pytest.mark.parametrize("name", ["endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"])
def test_ending_options_are_refused_in_a_stream_before_their_value_is_read(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_reader_options({**READ, name: "not even a value"}, streaming=True)
    assert str(caught.value) == f"Option '{name}': ending offset not valid in streaming queries"


def test_the_first_ending_option_in_table_order_is_named_in_a_stream() -> None:
    given = {"endingTimestamp": "1", "endingOffsets": "latest"}
    with pytest.raises(ConfigError, match="Option 'endingOffsets': ending offset not valid"):
        parse_reader_options({**READ, **given}, streaming=True)


# --------------------------------------------------------------------------- required


def test_the_required_rows_are_shown_required() -> None:
    required = [row for row in OPTIONS if row.required]
    assert [row.name for row in required] == ["kafka.bootstrap.servers"]
    assert all(row.shown_default() == "(required)" for row in required)


@pytest.mark.parametrize("blank", [None, "", "   "])
@pytest.mark.parametrize(("side", "client"), [("reader", "consumer"), ("writer", "producer")])
def test_a_missing_or_blank_required_option_is_refused(
    blank: str | None, side: str, client: str
) -> None:
    given = {} if blank is None else {"kafka.bootstrap.servers": blank}
    with pytest.raises(ConfigError) as caught:
        if side == "reader":
            parse_reader_options({**given, "subscribe": "t"}, streaming=True)
        else:
            parse_writer_options({**given, "topic": "t"})
    assert str(caught.value) == (
        f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {client}"
    )


def test_a_misspelt_required_option_is_pointed_at() -> None:
    view = OptionView({"kafka.bootstrap.server": "h:1"})
    with pytest.raises(ConfigError) as caught:
        required_value(view, "kafka.bootstrap.servers", "writer")
    assert str(caught.value) == (
        "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer "
        "(is 'kafka.bootstrap.server' a misspelling of it?)"
    )


def test_a_required_value_is_parsed_by_its_row() -> None:
    view = OptionView({"Kafka.Bootstrap.Servers": " h:1,h:2 "})
    assert required_value(view, "kafka.bootstrap.servers", "reader") == "h:1,h:2"
    assert parse_reader_options({**view, "subscribe": "t"}, streaming=True).bootstrap_servers == (
        "h:1,h:2"
    )
