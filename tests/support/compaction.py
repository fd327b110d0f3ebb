"""Compacted topics whose log cleaner really ran.

The embedded cluster never compacts. Apache Kafka does, but only segments that are no
longer active (a segment rolls when a record is appended ``segment.ms`` after it was
created), below the last stable offset, and only when its cleaner thread looks: when it
finds nothing to clean it waits ``log.cleaner.backoff.ms`` (15 s by default, a broker
setting with no topic-level counterpart). :func:`quick_log_cleaner` shortens that wait
for one test; :func:`data_offsets` is what a test waits on: the offsets of the records
still in the log, read by an independent client (confluent-kafka).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tests.support.clients import consume_messages
from tests.support.target import KafkaTarget

#: The broker setting :func:`quick_log_cleaner` lowers.
CLEANER_BACKOFF = "log.cleaner.backoff.ms"


def _set_cleaner_backoff(kafka: KafkaTarget, value: str | None) -> None:
    """Set (``value``) or remove (``None``) a dynamic per-broker ``log.cleaner.backoff.ms``
    on every node (librdkafka cannot address the cluster-wide default, whose resource name
    is empty). Kafka restarts its cleaner threads to apply either."""
    assert kafka.apache is not None
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry(CLEANER_BACKOFF, value or "", incremental_operation=op)
    admin = AdminClient({**kafka.apache.client_config(), "log_level": 0})
    for node in kafka.apache.nodes:  # librdkafka takes one BROKER resource per call
        resource = ConfigResource(
            ResourceType.BROKER, str(node.node_id), incremental_configs=[entry]
        )
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)


@contextmanager
def quick_log_cleaner(kafka: KafkaTarget, backoff_ms: int = 200) -> Iterator[bool]:
    """Inside, Apache Kafka's log cleaner looks for dirty logs every ``backoff_ms``
    (a dynamic broker config, removed again on the way out). Yields whether the cluster
    compacts at all: ``False`` on the embedded cluster (nothing is changed) and on an
    external one (left alone; it may or may not compact)."""
    if kafka.apache is None:
        yield False
        return
    _set_cleaner_backoff(kafka, str(backoff_ms))
    try:
        yield True
    finally:
        _set_cleaner_backoff(kafka, None)


def data_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """Per partition, the offsets of the records still in the log: what a
    ``read_uncommitted`` consumer returns (records of aborted transactions too, never the
    markers). Offsets missing between them that held records are compaction gaps."""
    out: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for msg in consume_messages(bootstrap, topic, partitions, isolation="read_uncommitted"):
        out[msg.partition() or 0].append(msg.offset() or 0)
    return out


def gaps(
    written: Mapping[int, list[int]], present: Mapping[int, list[int]]
) -> dict[int, list[int]]:
    """Per partition, the offsets that were written with a record and no longer hold one."""
    return {p: sorted(set(offs) - set(present.get(p, []))) for p, offs in written.items()}
