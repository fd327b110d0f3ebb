"""The chaos pipeline's input: independent transactional producers (confluent-kafka).

The feed's producers (one to three, each on a thread of its own, under transactional ids of
their own) write ``{"id": n, "fault": ...}`` records keyed ``k{n % keys}`` in transactions
of random size; a seeded share of them is aborted. :meth:`ChaosFeed.stall` adds a
transaction left open past its timeout, which the broker must abort. The feed survives
the faults the harness injects the bluntest way an application can: after any failed call
a producer is replaced by a new one under the same transactional id, whose InitProducerId
fences the old one and aborts its open transaction (a commit whose outcome is unknown may
have gone through).

Each producer records its own transactions' outcomes (:class:`FeedTruth`): the ids of every
transaction it saw committed (``commit_transaction()`` returned), of every one it ended
without a commit (aborted, or abandoned before its commit: the next producer's
InitProducerId aborts it), and, apart, those whose commit raised (their outcome is
unknown to the producer: all of a transaction's records are committed or none are). The
checker judges the output against this truth, not only against the input topic read
back from the broker under test.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

logger = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0


@dataclass(slots=True)
class FeedTruth:
    """What the feed's producers saw of their own transactions: the record ids of the
    transactions they committed, of those they ended without a commit, and, one set per
    transaction, of those whose commit raised (committed or not: all or none)."""

    committed: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    unknown: list[frozenset[int]] = field(default_factory=list)


@dataclass(slots=True)
class ChaosFeed:
    bootstrap: str
    topic: str
    seed: int
    producers: int = 1  # independent producers, each on a thread of its own
    #: Names the producers' transactional ids (one feed per query in multi-query runs).
    name: str = "chaos-feed"
    keys: int = 16
    abort_share: float = 0.25
    pause_s: float = 0.15  # between two transactions of one producer
    committed_txns: int = 0
    aborted_txns: int = 0
    failed_calls: int = 0
    #: Abandoned transactions (``stall``) the broker aborted at their timeout / that a
    #: late commit still got through (the broker's timeout sweep had not run yet).
    timed_out_txns: int = 0
    late_commits: int = 0
    error: BaseException | None = None
    truth: FeedTruth = field(default_factory=FeedTruth)
    #: Per :meth:`stall` (by the number it returned): ``timed_out``, ``late_commit`` or
    #: ``failed_early`` (a fault hit its setup: the transaction was never left open).
    stalls: dict[int, str] = field(default_factory=dict)
    _faults: list[str] = field(default_factory=list)  # pending record faults, FIFO
    _next: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def transactional_id(self, index: int) -> str:
        return f"{self.name}-{self.seed}-{index}"

    def start(self) -> None:
        for index in range(self.producers):
            self._spawn(self._run, f"chaos-feed-{index}", index)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT_S * 3)

    def flag(self, fault: str) -> None:
        """Give the next committed transaction's first record ``fault`` (exception/kill)."""
        with self._lock:
            self._faults.append(fault)

    def stall(self, records: int, timeout_ms: int, sweep_ms: int) -> int:
        """Write ``records`` in a transaction that is then left open past its timeout.

        On a thread of its own: a producer with ``transaction.timeout.ms = timeout_ms``
        flushes its records into the log, waits until the broker's timeout sweep (every
        ``sweep_ms``) must have aborted the transaction, then tries to commit anyway.
        Returns its number in :attr:`stalls`.
        """
        number = len(self._threads)
        name = f"{self.name}-{self.seed}-stalled-{number}"
        self._spawn(self._abandon, name, number, name, records, timeout_ms, sweep_ms)
        return number

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=self._guard, args=(target, *args), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guard(self, target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # reported by the harness
            logger.exception("chaos feed failed")
            self.error = exc

    def _producer(self, transactional_id: str, timeout_ms: int = 60_000) -> Any:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": transactional_id,
                "linger.ms": 5,
                "transaction.timeout.ms": timeout_ms,
            }
        )
        producer.init_transactions(CALL_TIMEOUT_S)
        return producer

    def _ids(self, count: int) -> range:
        with self._lock:
            first = self._next
            self._next += count
        return range(first, first + count)

    def _run(self, index: int) -> None:
        # Each feed of a multi-query run draws its own transactions (the default feed as before).
        own = "" if self.name == "chaos-feed" else f"-{self.name}"
        rng = random.Random(f"{self.seed}-{index}{own}")
        producer = None
        try:
            while not self._stop.is_set():
                if producer is None:
                    producer = self._producer(self.transactional_id(index))
                abort = rng.random() < self.abort_share
                count = rng.randint(1, 120)
                try:
                    self._transaction(producer, count, abort)
                except KafkaException as exc:
                    with self._lock:
                        self.failed_calls += 1
                    err: KafkaError = exc.args[0]
                    logger.info("feed %d: %s; starting a new producer", index, err)
                    producer = None
                self._stop.wait(self.pause_s)
        finally:
            if producer is not None:
                producer.flush(CALL_TIMEOUT_S)

    def _transaction(self, producer: Any, count: int, abort: bool) -> None:
        producer.begin_transaction()
        fault = None
        if not abort:
            with self._lock:
                fault = self._faults.pop(0) if self._faults else None
        ids = self._ids(count)
        try:
            for i, n in enumerate(ids):
                value = {"id": n, "fault": fault if i == 0 else None}
                key = f"k{n % self.keys}".encode()
                producer.produce(self.topic, json.dumps(value).encode(), key)
                producer.poll(0)
            if abort:
                # Into the log first: abort_transaction() would purge what is still queued.
                if producer.flush(CALL_TIMEOUT_S):
                    raise RuntimeError(
                        "the feed could not deliver an aborted transaction's records"
                    )
                producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException:
            with self._lock:  # never committed: the next producer's InitProducerId aborts it
                self.truth.aborted.update(ids)
                if fault is not None:
                    self._faults.insert(0, fault)  # try again with a later transaction
            raise
        if abort:
            with self._lock:
                self.aborted_txns += 1
                self.truth.aborted.update(ids)
            return
        try:
            producer.commit_transaction(CALL_TIMEOUT_S)
        except KafkaException:
            with self._lock:  # committed or not: the checker asks the output and the input
                self.truth.unknown.append(frozenset(ids))
                if fault is not None:
                    self._faults.insert(0, fault)  # try again with a later transaction
            raise
        with self._lock:
            self.committed_txns += 1
            self.truth.committed.update(ids)

    def _abandon(
        self, number: int, transactional_id: str, records: int, timeout_ms: int, sweep_ms: int
    ) -> None:
        ids = self._ids(records)
        try:
            producer = self._producer(transactional_id, timeout_ms)
            producer.begin_transaction()
            for n in ids:
                value = {"id": n, "fault": None}
                producer.produce(
                    self.topic, json.dumps(value).encode(), f"k{n % self.keys}".encode()
                )
            if producer.flush(CALL_TIMEOUT_S):
                raise RuntimeError("the feed could not deliver a stalled transaction's records")
        except KafkaException as exc:  # a fault hit the setup: nothing was committed
            logger.info("feed: stalled transaction failed early: %s", exc.args[0])
            with self._lock:
                self.failed_calls += 1
                self.truth.aborted.update(ids)
                self.stalls[number] = "failed_early"
            return
        # The producer hangs (a GC pause, a stuck thread) past its timeout, even if the
        # feed is being stopped meanwhile (stop() waits for it).
        threading.Event().wait((timeout_ms + 2 * sweep_ms) / 1000)
        try:
            producer.commit_transaction(CALL_TIMEOUT_S)
        except KafkaException as exc:
            logger.info("feed: stalled transaction not committed: %s", exc.args[0])
            with self._lock:
                self.timed_out_txns += 1
                self.truth.unknown.append(frozenset(ids))  # the commit raised: unknown
                self.stalls[number] = "timed_out"
        else:
            with self._lock:
                self.late_commits += 1
                self.truth.committed.update(ids)
                self.stalls[number] = "late_commit"
