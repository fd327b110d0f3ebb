"""The chaos checker: librdkafka consumers and plain Python, nothing of the connector.

The truth is what the feed's producers saw of their own transactions
(:class:`~tests.chaos.feed.FeedTruth`): the ids they committed, those they aborted, and
the transactions whose commit raised (all of such a transaction's records committed, or
none). The input topic read back from the broker is a second witness, read twice:
``read_committed`` gives the committed input records, ``read_uncommitted`` minus those the
aborted ones; it must agree with the feed (a broker that loses a committed input
transaction, or shows an aborted one, is caught here), and it settles the transactions
whose commit outcome the feed does not know. The output must hold every committed input
record exactly once (same key, pointing back at the same input offset), nothing aborted
and nothing else; within an output partition the records of a key must follow their input
order; and no output partition may have its last stable offset below its high watermark
(a transaction left open). An output topic several queries write is judged per query: a
query's records are those whose source names its input topic.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from tests.chaos.feed import FeedTruth

READ_TIMEOUT_S = 180.0


@dataclass(frozen=True, slots=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: dict[str, Any]


def _consumer(bootstrap: str, isolation: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-checker",  # assign() only
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )


def partitions_of(bootstrap: str, topic: str) -> int:
    consumer = _consumer(bootstrap, "read_uncommitted")
    try:
        return len(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, isolation: str) -> list[Record]:
    """Every record of ``topic`` a consumer at ``isolation`` reads, to the end."""
    count = partitions_of(bootstrap, topic)
    consumer = _consumer(bootstrap, isolation)
    records: list[Record] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])
        while len(at_end) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"reading {topic} ({isolation}): no end after {READ_TIMEOUT_S} s"
                )
            for m in consumer.consume(1000, 0.5):
                err = m.error()
                if err is None:
                    records.append(
                        Record(m.partition(), m.offset(), m.key(), json.loads(m.value()))
                    )
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {err}")
    finally:
        consumer.close()
    return records


def high_watermarks(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """Per partition, the end ListOffsets reports at ``isolation`` (LSO or high watermark)."""
    consumer = _consumer(bootstrap, isolation)
    try:
        return {
            p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), 30, False)[1])
            for p in range(partitions_of(bootstrap, topic))
        }
    finally:
        consumer.close()


@dataclass(slots=True)
class Verdict:
    input_committed: int = 0
    input_aborted: int = 0
    output: int = 0
    output_in_log: int = 0  # read_uncommitted: aborted attempts included
    #: Records of the output topic from other queries (a topic several queries write).
    output_others: int = 0
    #: The feed's own account: records it committed, aborted, and whose commit raised.
    feed_committed: int = 0
    feed_aborted: int = 0
    feed_unknown: int = 0
    #: Counts by anomaly kind (all 0 when the output is exactly once).
    lost: int = 0
    duplicated: int = 0
    aborted_visible: int = 0
    unknown: int = 0
    mismatched: int = 0
    reordered: int = 0
    lingering: int = 0  # output partitions whose LSO is below the high watermark
    #: Input records where the broker's read-back disagrees with the feed's producers.
    input_disagrees: int = 0
    anomalies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.anomalies


def _some(items: Any) -> str:
    items = sorted(items)
    return ", ".join(map(str, items[:5])) + (
        f" and {len(items) - 5} more" if len(items) > 5 else ""
    )


def check(
    bootstrap: str, input_topic: str, output_topic: str, truth: FeedTruth | None = None
) -> Verdict:
    """Judge ``output_topic`` (the records that came from ``input_topic``) against the
    feed's ``truth`` and the input topic read back; without ``truth``, against the
    read-back alone."""
    committed = read_all(bootstrap, input_topic, "read_committed")
    everything = read_all(bootstrap, input_topic, "read_uncommitted")
    ours = f"{input_topic}/"
    out_all = read_all(bootstrap, output_topic, "read_committed")
    out = [r for r in out_all if str(r.value.get("src", "")).startswith(ours)]
    verdict = Verdict(output=len(out), output_others=len(out_all) - len(out))
    verdict.output_in_log = sum(
        1
        for r in read_all(bootstrap, output_topic, "read_uncommitted")
        if str(r.value.get("src", "")).startswith(ours)
    )
    source = {r.value["id"]: r for r in committed}
    aborted = {r.value["id"] for r in everything} - source.keys()
    verdict.input_committed, verdict.input_aborted = len(source), len(aborted)
    if len(source) != len(committed):
        verdict.anomalies.append("the input holds an id twice: the checker cannot judge")
    expected, aborted = _truth(verdict, truth, source.keys(), aborted)

    counts = Counter(r.value["id"] for r in out)
    missing = expected - counts.keys()
    twice = {i for i, n in counts.items() if n > 1}
    leaked = aborted & counts.keys()
    unknown = counts.keys() - expected - aborted
    verdict.lost, verdict.duplicated = len(missing), len(twice)
    verdict.aborted_visible, verdict.unknown = len(leaked), len(unknown)
    for name, ids in (
        ("committed input records missing from the output", missing),
        ("input records more than once in the output", twice),
        ("records of aborted input transactions visible in the output", leaked),
        ("output records that match no input record", unknown),
    ):
        if ids:
            verdict.anomalies.append(f"{name}: {len(ids)} ({_some(ids)})")

    wrong = []
    for r in out:
        src = source.get(r.value["id"])
        if src is not None and (
            r.key != src.key or r.value["src"] != f"{input_topic}/{src.partition}/{src.offset}"
        ):
            wrong.append(r.value["id"])
    verdict.mismatched = len(wrong)
    if wrong:
        verdict.anomalies.append(f"output records with another key or source: {_some(wrong)}")

    # Per key within an output partition, input offsets must increase (one input
    # partition per key: records are keyed, so a key always lands in the same partition).
    last: dict[tuple[int, bytes | None], int] = {}
    reordered: defaultdict[int, list[int]] = defaultdict(list)
    for r in sorted(out, key=lambda r: (r.partition, r.offset)):
        src = source.get(r.value["id"])
        if src is None:
            continue
        previous = last.get((r.partition, r.key))
        if previous is not None and src.offset <= previous:
            reordered[r.partition].append(r.value["id"])
        last[(r.partition, r.key)] = src.offset
    verdict.reordered = sum(len(ids) for ids in reordered.values())
    for partition, broken in reordered.items():
        verdict.anomalies.append(
            f"output partition {partition}: key order broken at {_some(broken)}"
        )

    stable = high_watermarks(bootstrap, output_topic, "read_committed")
    high = high_watermarks(bootstrap, output_topic, "read_uncommitted")
    pinned = {p: (stable[p], high[p]) for p in high if stable.get(p) != high[p]}
    verdict.lingering = len(pinned)
    if pinned:
        verdict.anomalies.append(f"output transactions left open (LSO, high watermark): {pinned}")
    return verdict


def _truth(
    verdict: Verdict, truth: FeedTruth | None, read_committed: Any, read_aborted: set[int]
) -> tuple[set[int], set[int]]:
    """The ids the output must hold and those it must not: the feed's account, checked
    against the read-back (its disagreements are anomalies); a transaction whose commit
    raised in the feed is taken as the read-back shows it, if it shows all of it one way."""
    seen = set(read_committed)
    if truth is None:
        return seen, read_aborted
    verdict.feed_committed, verdict.feed_aborted = len(truth.committed), len(truth.aborted)
    verdict.feed_unknown = sum(len(t) for t in truth.unknown)
    expected, excluded = set(truth.committed), set(truth.aborted)
    torn: set[int] = set()
    for txn in truth.unknown:
        shown = txn & seen
        if shown == txn:
            expected |= txn
        elif not shown:
            excluded |= txn
        else:
            torn |= txn
    written = expected | excluded | torn
    problems = (
        (
            "records the feed committed, missing from the input (read_committed)",
            truth.committed - seen,
        ),
        ("records the feed aborted, committed in the input", truth.aborted & seen),
        ("records of one transaction partly committed in the input", torn),
        ("input records the feed never wrote", (seen | read_aborted) - written),
    )
    for name, ids in problems:
        verdict.input_disagrees += len(ids)
        if ids:
            verdict.anomalies.append(f"{name}: {len(ids)} ({_some(ids)})")
    return expected, excluded
