"""Reading the demo's output as its consumers would, and checking it against the input.

Everything here reads with confluent-kafka (librdkafka), not with this package's code: the
live :class:`Watcher` (when each output record became visible to a ``read_committed``
consumer) and :func:`read_orders` (the whole topic, afterwards). :func:`check` compares
the order ids found with what the input producer committed and aborted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

#: How long reading a topic to its end may take before the demo reports a hang.
READ_TIMEOUT_S = 120.0


def _consumer(bootstrap: str, isolation: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-txn-demo-reader",  # assign() only: never joins or commits
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            **extra,
        }
    )


def _order(value: bytes | None) -> int:
    order: int = json.loads(value or b"null")["order"]
    return order


@dataclass(slots=True)
class Watcher:
    """A read_committed consumer of the output on a thread: when each order became visible."""

    bootstrap: str
    topic: str
    partitions: int
    #: (wall time in s when the consumer received it, order id), in arrival order.
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start consuming from the beginning of every partition."""
        self._thread = threading.Thread(target=self._run, name="demo-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop consuming."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def seen(self, order: int) -> bool:
        """Whether ``order`` has become visible."""
        return any(o == order for _, o in self.arrivals)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = _consumer(self.bootstrap, "read_committed")
        try:
            consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            )
            while not self._stop.is_set():
                messages = consumer.consume(1000, 0.1)
                now = time.time()
                for message in messages:
                    if message.error() is None:
                        self.arrivals.append((now, _order(message.value())))
        except BaseException as exc:  # reported by the demo
            logger.exception("the demo's output watcher failed")
            self.error = exc
        finally:
            consumer.close()


def read_orders(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """Every order id in ``topic`` as a consumer with ``isolation`` reads it to its end."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    consumer = _consumer(bootstrap, isolation, **{"enable.partition.eof": True})
    orders: list[int] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + READ_TIMEOUT_S
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} ({isolation}) did not reach its end")
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                if error is None:
                    orders.append(_order(message.value()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {error}")
    finally:
        consumer.close()
    return orders


@dataclass(frozen=True, slots=True)
class Check:
    """One verified property of the output."""

    name: str
    ok: bool
    detail: str = ""


def _some(ids: Collection[int]) -> str:
    shown = sorted(ids)[:5]
    more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
    return ", ".join(map(str, shown)) + more


def check(
    committed: Collection[int],
    aborted: Collection[int],
    output: Sequence[int],
    pinned: Mapping[int, tuple[int, int]],
) -> list[Check]:
    """The exactly-once checks.

    Parameters
    ----------
    committed, aborted
        Order ids of the input's committed and aborted transactions.
    output
        Order ids a read_committed consumer read from the output, in any order.
    pinned
        Output partitions whose last stable offset is below the high watermark
        (partition -> (LSO, high watermark)): a transaction still open.
    """
    counts = Counter(output)
    committed_set, aborted_set = set(committed), set(aborted)
    missing = committed_set - counts.keys()
    twice = {o for o, n in counts.items() if n > 1}
    leaked = aborted_set & counts.keys()
    unknown = counts.keys() - committed_set - aborted_set
    return [
        Check(
            "every committed input order is in the output",
            not missing,
            f"missing: {_some(missing)}" if missing else f"{len(committed_set)} orders",
        ),
        Check(
            "no order twice",
            not twice,
            f"more than once: {_some(twice)}" if twice else f"{len(output)} records",
        ),
        Check(
            "nothing of the aborted input transactions",
            not leaked,
            f"visible: {_some(leaked)}" if leaked else f"{len(aborted_set)} aborted orders absent",
        ),
        Check(
            "nothing else",
            not unknown,
            f"unexpected orders: {_some(unknown)}" if unknown else "",
        ),
        Check(
            "no transaction left open in the output (LSO = high watermark)",
            not pinned,
            ", ".join(f"partition {p}: LSO {lso} < {hw}" for p, (lso, hw) in pinned.items()),
        ),
    ]
