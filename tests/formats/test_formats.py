"""Durable formats: what today's package wrote is read back; a newer format is refused.

The records are those of :mod:`tests.support.durable_formats`, exactly as the package
committed them to Kafka or Spark wrote them into the checkpoint. Each reading function is
the one the package runs on them; ``tests/writer/test_formats.py`` reads the same records
through a real cluster and shows a newer decision record stopping a write.
"""

from __future__ import annotations

import json
import pickle
import re
import zlib

import pytest

from pyspark_kafka_txn import __version__
from pyspark_kafka_txn.client.producer import PreparedTransaction
from pyspark_kafka_txn.errors import FormatVersionError, KafkaTxnError
from pyspark_kafka_txn.formats import (
    BATCH_MARKER,
    CLAIM,
    DECISION_RECORD,
    LIVENESS_LEASE,
    READER_OFFSETS,
    DurableFormat,
)
from pyspark_kafka_txn.offsets import check_format, from_json_dict, origin_of, to_json_dict
from pyspark_kafka_txn.options.reader import parse_reader_options
from pyspark_kafka_txn.reader.stream import KafkaStreamReader
from pyspark_kafka_txn.wire import TopicPartition
from pyspark_kafka_txn.writer.common import check_marker, marker_metadata
from pyspark_kafka_txn.writer.decision import Handle, Header, decode_handles, parse_header
from pyspark_kafka_txn.writer.idempotent import Claim, parse_claim
from pyspark_kafka_txn.writer.liveness import Lease, parse_lease
from tests.support import durable_formats as v1

PREFIX = "fixture-"
WHOSE = f"of query {v1.QUERY} (group {PREFIX}{v1.QUERY}-decision)"
#: What every refusal of a newer format says: the thing, the format found, what is read.
VERSION = re.escape(__version__)


def _newer(name: str, found: int = 2) -> str:
    return (
        rf"The {name} .* has format {found}; this package \(pyspark-kafka-txn {VERSION}\) "
        rf"reads {name} format 1\. A newer pyspark-kafka-txn wrote it: upgrade "
        rf"pyspark-kafka-txn to a version that reads {name} format {found}\.$"
    )


#: Metadata that is no record of ours: ignored where the package reads its records.
FOREIGN = ["", "not json", "[1, 2]", '"f"', '{"x": 1}', '{"f": "2"}', '{"f": true}', "{"]


def test_every_format_is_at_version_1() -> None:
    # Changing one needs records of the new version in tests/support/durable_formats.py.
    formats = (DECISION_RECORD, BATCH_MARKER, CLAIM, LIVENESS_LEASE, READER_OFFSETS)
    assert [f.current for f in formats] == [1, 1, 1, 1, 1]


# -- decision record --------------------------------------------------------------------


def test_decision_header_may_name_the_deciding_runs_spark_partitions() -> None:
    # "p" was added to format 1 later: an older package ignores it, a newer one reads
    # records without it (partitions unknown: a replay's partitioning is not checked).
    header = parse_header('{"f":1,"b":7,"n":1,"s":0,"t":5,"c":0,"p":4}', WHOSE)
    assert header is not None and header.partitions == 4
    older = parse_header(v1.DECISION_HEADER, WHOSE)
    assert older is not None and older.partitions is None


def test_decision_header_may_name_the_run_that_looked_for_another_prefix() -> None:
    # "r" too came later to format 1: without it, the next decision looks again.
    run = "0b0e5c4e-6f0a-4a34-9d1e-9c3c1b1f1a2b"
    header = parse_header(f'{{"f":1,"b":7,"n":1,"s":0,"t":5,"c":0,"r":"{run}"}}', WHOSE)
    assert header is not None and header.checked_run == run
    older = parse_header(v1.DECISION_HEADER, WHOSE)
    assert older is not None and older.checked_run is None


def test_decision_record_of_format_1_is_read() -> None:
    header = parse_header(v1.DECISION_HEADER, WHOSE)
    assert header == Header(
        batch=7, time_ms=1795733262525, slot=0, chunks=1, checksum=863140248, withdrawn=False
    )
    assert zlib.crc32(v1.DECISION_CHUNK.encode()) == header.checksum
    handles = decode_handles(v1.DECISION_CHUNK, PREFIX, v1.QUERY)
    assert handles == {
        p: Handle(p, PreparedTransaction(f"{PREFIX}{v1.QUERY}-{p}", pid, epoch, tv))
        for p, (pid, epoch, tv) in v1.DECISION_HANDLES.items()
    }


def test_withdrawn_decision_of_format_1_is_read() -> None:
    header = parse_header(v1.WITHDRAWN_HEADER, WHOSE)
    assert header is not None and header.withdrawn and (header.batch, header.chunks) == (7, 0)


@pytest.mark.parametrize("found", [2, 3, 1000])
def test_decision_record_of_a_newer_format_is_refused(found: int) -> None:
    newer = json.dumps({**json.loads(v1.DECISION_HEADER), "f": found})
    with pytest.raises(FormatVersionError, match=_newer("decision record", found)) as caught:
        parse_header(newer, WHOSE)
    assert v1.QUERY in str(caught.value)
    assert (caught.value.found, caught.value.oldest, caught.value.newest) == (found, 1, 1)


def test_decision_record_of_format_0_is_refused() -> None:
    older = v1.DECISION_HEADER.replace('"f":1', '"f":0')
    with pytest.raises(
        FormatVersionError, match=r"has format 0; .*No version .* writes decision record format 0"
    ):
        parse_header(older, WHOSE)


@pytest.mark.parametrize("metadata", [*FOREIGN, None])
def test_metadata_that_is_no_decision_header_is_ignored(metadata: str | None) -> None:
    assert parse_header(metadata, WHOSE) is None


def test_decision_header_of_format_1_missing_a_field_is_an_error() -> None:
    broken = json.dumps({k: v for k, v in json.loads(v1.DECISION_HEADER).items() if k != "n"})
    with pytest.raises(KafkaTxnError, match=r"decision record .* is unreadable: .* lacks 'n'"):
        parse_header(broken, WHOSE)


# -- batch markers ----------------------------------------------------------------------


def test_batch_markers_of_format_1_are_read_and_still_written() -> None:
    for partition, metadata in v1.MARKERS.items():
        check_marker(metadata, f"{PREFIX}{v1.QUERY}-{partition}")
    assert marker_metadata(7, 2) == v1.MARKERS[0]


def test_batch_marker_of_a_newer_format_is_refused() -> None:
    tid = f"{PREFIX}{v1.QUERY}-0"
    newer = v1.MARKERS[0].replace('"w": 1', '"w": 2')
    with pytest.raises(FormatVersionError, match=_newer("batch marker")) as caught:
        check_marker(newer, tid)
    assert tid in str(caught.value)


@pytest.mark.parametrize("metadata", [*FOREIGN, None])
def test_marker_metadata_naming_no_format_is_read_by_its_offset(metadata: str | None) -> None:
    check_marker(metadata, "tid")  # no error: read_marker takes the offset as the batch


# -- idempotent-write claim -------------------------------------------------------------


def test_claim_of_format_1_is_read() -> None:
    anchor = (v1.TOPIC, 0)
    assert parse_claim(v1.CLAIM, anchor, "of app") == Claim(v1.CLAIM_RUN, 3, 1795733262538, anchor)


def test_claim_of_a_newer_format_is_refused() -> None:
    newer = v1.CLAIM.replace('"f":1', '"f":2')
    with pytest.raises(FormatVersionError, match=_newer("idempotent-write claim")) as caught:
        parse_claim(newer, (v1.TOPIC, 0), f"of {v1.APP_QUERY}")
    assert v1.APP_QUERY in str(caught.value)


@pytest.mark.parametrize("metadata", [*FOREIGN, None])
def test_metadata_that_is_no_claim_is_ignored(metadata: str | None) -> None:
    assert parse_claim(metadata, (v1.TOPIC, 0), "of app") is None


# -- liveness lease ---------------------------------------------------------------------


def test_lease_of_format_1_is_read() -> None:
    anchor = (v1.TOPIC, 0)
    assert parse_lease(v1.LEASE, anchor, "of query") == Lease(1795733262600, 60000, anchor)


def test_lease_of_a_newer_format_is_refused() -> None:
    newer = v1.LEASE.replace('"f":1', '"f":2')
    with pytest.raises(FormatVersionError, match=_newer("liveness lease")) as caught:
        parse_lease(newer, (v1.TOPIC, 0), f"of query {v1.QUERY}")
    assert v1.QUERY in str(caught.value)


@pytest.mark.parametrize("metadata", [*FOREIGN, None, '{"f":1,"t":5}'])
def test_metadata_that_is_no_lease_is_ignored(metadata: str | None) -> None:
    assert parse_lease(metadata, (v1.TOPIC, 0), "of query") is None


# -- reader offsets ---------------------------------------------------------------------

ORDERS = "kafka-txn-orders"


def test_reader_offsets_of_format_1_are_read() -> None:
    first, later = json.loads(v1.OFFSETS_FIRST), json.loads(v1.OFFSETS)
    assert check_format(first) == check_format(later) == 1
    assert from_json_dict(first) == {TopicPartition(ORDERS, 0): 25, TopicPartition(ORDERS, 1): 34}
    assert origin_of(first) == {TopicPartition(ORDERS, 0): 0, TopicPartition(ORDERS, 1): 0}
    assert from_json_dict(later) == {TopicPartition(ORDERS, 0): 45, TopicPartition(ORDERS, 1): 61}
    assert origin_of(later) is None
    # Format 1 is still what the reader writes: Spark's own shape, no version key.
    assert json.dumps(to_json_dict(from_json_dict(later))) == v1.OFFSETS


def test_reader_offsets_may_name_format_1() -> None:
    assert from_json_dict({"t": {"0": 5}, "@format": 1}) == {TopicPartition("t", 0): 5}


@pytest.mark.parametrize("parse", [from_json_dict, origin_of, check_format])
def test_reader_offsets_of_a_newer_format_are_refused(parse: object) -> None:
    newer = {**json.loads(v1.OFFSETS), "@format": 2}
    assert callable(parse)
    with pytest.raises(FormatVersionError, match=_newer("reader offset")) as caught:
        parse(newer)
    assert "checkpoint" in str(caught.value) and ORDERS in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"@format": "2"}, r"has the format '2' \(not a number\)"),
        ({"@partitions": {"t": 3}}, r"has the entries \['@partitions'\]"),
    ],
)
def test_reader_offsets_with_unknown_entries_are_refused(
    extra: dict[str, object], said: str
) -> None:
    with pytest.raises(FormatVersionError, match=rf"The reader offset .* {said}.*upgrade"):
        from_json_dict({**json.loads(v1.OFFSETS), **extra})


def test_stream_reader_refuses_a_newer_checkpoint_offset_before_connecting() -> None:
    # On restart Spark announces the checkpoint's last offset as partitions(end, end).
    options = parse_reader_options(
        {"kafka.bootstrap.servers": "localhost:1", "subscribe": ORDERS}, streaming=True
    )
    newer = {**json.loads(v1.OFFSETS), "@format": 2}
    with pytest.raises(FormatVersionError, match=_newer("reader offset")):
        KafkaStreamReader(options).partitions(newer, newer)


# -- the error --------------------------------------------------------------------------


def test_format_version_error_keeps_its_versions_when_pickled() -> None:
    fmt = DurableFormat("thing", 3, oldest=2)
    with pytest.raises(FormatVersionError, match=r"reads thing formats 2 to 3") as caught:
        fmt.check(4, "of x")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is FormatVersionError and str(copy) == str(caught.value)
    assert (copy.found, copy.oldest, copy.newest) == (4, 2, 3)
