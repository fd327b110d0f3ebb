"""The stream reader on a PySpark without admission control (before Apache Spark 4.2).

Spark then calls ``latestOffset()`` without a start or a read limit (and never
``prepareForTriggerAvailableNow``): the reader limits its own answer from the offset it
knows the next micro-batch starts at. Called here as that Spark calls it, in the order it
calls it: a new query's first ``latestOffset()`` comes before ``initialOffset()``; a
restarted one's after ``partitions(end, end)`` (``setLatestSeenOffset``). The same code
runs on every PySpark, so this runs on the newest; ``tests/spark_versions`` runs real
queries on the older ones.
"""

from __future__ import annotations

import time

from pyspark_kafka_txn.offsets import ORIGIN, OffsetJson, from_json_dict
from tests.reader.test_reader_driver import stream_reader
from tests.support.target import KafkaTarget
from tests.support.txns import committed_batches


def _width(start: OffsetJson, end: OffsetJson) -> int:
    begin = from_json_dict(start)
    return sum(o - begin.get(tp, 0) for tp, o in from_json_dict(end).items())


def test_max_offsets_per_trigger_without_a_read_limit(kafka: KafkaTarget) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=2)
    # Three transactions of 10 records over both partitions: 36 offsets with the markers.
    committed_batches(bs, topic, [[(i % 2, b"x") for i in range(10)] for _ in range(3)])
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"}
    reader = stream_reader(bs, topic, **options)

    first = reader.latestOffset()  # before initialOffset(), as Spark calls them
    start = reader.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}
    assert first[ORIGIN] == start
    assert 0 < _width(start, first) <= 10
    ends = [first]
    assert reader.partitions(start, first)
    while True:
        end = reader.latestOffset()
        if end == ends[-1]:
            break  # nothing new: the same offset, so Spark plans no batch
        assert ORIGIN not in end
        assert 0 < _width(ends[-1], end) <= 10
        ends.append(end)
    assert from_json_dict(ends[-1]) == from_json_dict({topic: {"0": 18, "1": 18}})
    assert len(ends) >= 4

    # A restarted query: Spark announces the last planned end, then asks for the next.
    restarted = stream_reader(bs, topic, **options)
    assert restarted.partitions(ends[1], ends[1]) == []
    following = restarted.latestOffset()
    assert following == ends[2]
    assert restarted.partitions(ends[1], following) == reader.partitions(ends[1], ends[2])


def test_min_offsets_per_trigger_and_max_trigger_delay_without_a_read_limit(
    kafka: KafkaTarget,
) -> None:
    bs = kafka.bootstrap_servers
    topic = kafka.create_topic(partitions=1)
    committed_batches(bs, topic, [[(0, b"a"), (0, b"b")]])  # offsets 0, 1 and a marker
    options = {"startingOffsets": "earliest", "minOffsetsPerTrigger": "100"}

    # The first trigger of a reader is never delayed (as in Spark's Kafka source).
    waiting = stream_reader(bs, topic, maxTriggerDelay="1h", **options)
    first = waiting.latestOffset()
    assert from_json_dict(first) == from_json_dict({topic: {"0": 3}})
    committed_batches(bs, topic, [[(0, b"c")]])  # two more offsets: fewer than 100
    assert waiting.latestOffset() == first  # delayed: the same offset, no batch

    # Past maxTriggerDelay the batch runs with what there is.
    quick = stream_reader(bs, topic, maxTriggerDelay="50ms", **options)
    begin = quick.latestOffset()
    committed_batches(bs, topic, [[(0, b"d")]])
    time.sleep(0.1)
    assert _width(begin, quick.latestOffset()) == 2
