"""What the least-privilege ACL tests share, on the embedded cluster and on Apache Kafka: the
pipeline's input and the independent read-back of an output topic."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.support.clients import consume_messages

#: The pipelines' input: 3 committed transactions of 10 records over 2 partitions, as
#: (partition, value).
INPUT = [[(i % 2, f"b{n}-{i}".encode()) for i in range(10)] for n in range(3)]

#: A hang detector for reading a topic to its end (not a timing assertion).
READ_HANG_S = 180.0


def input_values() -> Counter[bytes]:
    """Every value of :data:`INPUT`, once."""
    return Counter(value for batch in INPUT for _, value in batch)


def committed_values(
    bootstrap: str, topic: str, partitions: int = 2, **conf: Any
) -> Counter[bytes]:
    """Every value a read_committed librdkafka consumer sees in ``topic``, counted.

    Parameters
    ----------
    bootstrap
        The cluster's bootstrap servers.
    topic
        The topic, read from offset 0 of each of its ``partitions`` to the end.
    partitions
        How many partitions ``topic`` has.
    **conf
        More librdkafka settings: a principal allowed to read ``topic`` on a secured
        cluster.

    Returns
    -------
    collections.Counter
        How many times each value is visible.
    """
    seen: Counter[bytes] = Counter()
    for message in consume_messages(bootstrap, topic, partitions, timeout_s=READ_HANG_S, **conf):
        value = message.value()
        assert value is not None, f"a record without a value in {topic}"
        seen[value] += 1
    return seen
