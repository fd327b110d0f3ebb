"""The demo's input: an independent producer writing orders in Kafka transactions.

It is what some other application would do upstream of the Spark job: confluent-kafka
(librdkafka), not this package's client, writing until it is told to stop. Most
transactions commit; every ``abort_every``-th aborts, so its orders are in the log but must
never reach the output. It remembers which order ids were committed (and when) and which
were aborted: the ground truth the demo checks the output against.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

#: Seconds librdkafka may take for one transactional call before the demo gives up.
CALL_TIMEOUT_S = 60.0
CUSTOMERS = 12


@dataclass(frozen=True, slots=True)
class FeedPlan:
    """What the feed writes.

    Parameters
    ----------
    orders_per_transaction
        Orders (records) in each transaction.
    abort_every
        Every ``abort_every``-th transaction is aborted (the 3rd, 7th, … for 4).
    fail_once_transaction
        The transaction holding the order flagged ``fail_once``: the Spark task that
        transforms it fails on its first attempt.
    pause_s
        Pause between transactions (a steady input rate).
    """

    orders_per_transaction: int = 100
    abort_every: int = 4
    fail_once_transaction: int = 2
    pause_s: float = 0.3

    def __post_init__(self) -> None:
        if self.aborts(self.fail_once_transaction):
            raise ValueError("the fail_once order must be in a committed transaction")

    def aborts(self, n: int) -> bool:
        """Whether transaction ``n`` (from 0) is aborted."""
        return n % self.abort_every == self.abort_every - 1


def order_value(order: int, rng: random.Random, *, fail_once: bool = False) -> tuple[bytes, bytes]:
    """The key (the customer) and JSON value of one order."""
    customer = f"customer-{rng.randrange(CUSTOMERS):02d}"
    value = {
        "order": order,
        "customer": customer,
        "qty": rng.randint(1, 5),
        "price_cents": rng.randint(99, 9_999),
        "fail_once": fail_once,
    }
    return customer.encode(), json.dumps(value, separators=(",", ":")).encode()


@dataclass(slots=True)
class Feed:
    """Writes transactions from a thread until stopped; can be paused between them."""

    bootstrap: str
    topic: str
    plan: FeedPlan
    seed: int = 7
    #: order id -> wall time (s) at which it became readable (its commit returned).
    committed: dict[int, float] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    #: The order flagged ``fail_once``.
    fail_once_order: int = -1
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    _next_order: int = 0
    transactions: int = 0  # ended so far
    _running: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _idle: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start writing from a background thread."""
        self._running.set()
        self._thread = threading.Thread(target=self._run, name="demo-feed", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """Return once the feed is between transactions and holds there."""
        self._running.clear()
        while not (self._idle.wait(0.1) or self.done.is_set()):
            pass

    def resume(self) -> None:
        """Let a paused feed go on."""
        self._running.set()

    def stop(self, timeout_s: float) -> None:
        """Finish the transaction under way and stop; raise what the feed failed with."""
        self._stop.set()
        self._running.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.error is not None:
            raise RuntimeError(f"the input producer failed: {self.error}") from self.error

    def write_outside_transactions(self, count: int) -> None:
        """``count`` orders from a plain idempotent producer: readable at once."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True})
        rng = random.Random(self.seed + 1)
        orders = range(self._next_order + 1_000_000, self._next_order + 1_000_000 + count)
        for order in orders:
            key, value = order_value(order, rng)
            producer.produce(self.topic, value, key)
        if producer.flush(CALL_TIMEOUT_S):
            raise RuntimeError("the plain producer did not deliver its orders")
        now = time.time()
        self.committed.update(dict.fromkeys(orders, now))

    def _run(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # reported by stop()
            logger.exception("the demo's input producer failed")
            self.error = exc
        finally:
            self._idle.set()
            self.done.set()

    def _write(self) -> None:
        from confluent_kafka import Producer

        producer: Any = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": "demo-orders-feed",
                "linger.ms": 5,
            }
        )
        producer.init_transactions(CALL_TIMEOUT_S)
        rng = random.Random(self.seed)
        for n in itertools.count():
            self._idle.set()
            self._running.wait()
            if self._stop.is_set():
                break
            self._idle.clear()
            orders = range(self._next_order, self._next_order + self.plan.orders_per_transaction)
            self._next_order = orders.stop
            producer.begin_transaction()
            for order in orders:
                flagged = n == self.plan.fail_once_transaction and order == orders[0]
                if flagged:
                    self.fail_once_order = order
                key, value = order_value(order, rng, fail_once=flagged)
                producer.produce(self.topic, value, key)
                producer.poll(0)
            if self.plan.aborts(n):
                # Into the log first: abort_transaction() would purge what is still queued.
                if producer.flush(CALL_TIMEOUT_S):
                    raise RuntimeError("the aborted transaction's orders were not delivered")
                producer.abort_transaction(CALL_TIMEOUT_S)
                self.aborted.update(orders)
            else:
                producer.commit_transaction(CALL_TIMEOUT_S)
                now = time.time()
                self.committed.update(dict.fromkeys(orders, now))
            self.transactions = n + 1
            self._stop.wait(self.plan.pause_s)
        producer.flush(CALL_TIMEOUT_S)
