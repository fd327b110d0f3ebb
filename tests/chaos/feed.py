"""The chaos pipeline's input: independent transactional producers (confluent-kafka).

The feed writes ``{"id": n, "fault": ...}`` records keyed ``k{n % keys}`` in transactions
of random size; a seeded share of them is aborted. It survives the faults the harness
injects the bluntest way an application can: after any failed call it makes a new producer
under the same transactional id, whose InitProducerId fences the old one and aborts its
open transaction (a commit whose outcome is unknown may have gone through: the checker
does not care, it reads the input topic itself).
"""

from __future__ import annotations

import json
import logging
import random
import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0


@dataclass(slots=True)
class ChaosFeed:
    bootstrap: str
    topic: str
    seed: int
    keys: int = 16
    abort_share: float = 0.25
    pause_s: float = 0.15
    committed_txns: int = 0
    aborted_txns: int = 0
    failed_calls: int = 0
    error: BaseException | None = None
    _faults: list[str] = field(default_factory=list)  # pending record faults, FIFO
    _next: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chaos-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CALL_TIMEOUT_S * 3)

    def flag(self, fault: str) -> None:
        """Give the next committed transaction's first record ``fault`` (exception/kill)."""
        with self._lock:
            self._faults.append(fault)

    def _producer(self) -> Any:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": f"chaos-feed-{self.seed}",
                "linger.ms": 5,
                "transaction.timeout.ms": 60_000,
            }
        )
        producer.init_transactions(CALL_TIMEOUT_S)
        return producer

    def _run(self) -> None:
        rng = random.Random(self.seed)
        producer = None
        try:
            while not self._stop.is_set():
                if producer is None:
                    producer = self._producer()
                abort = rng.random() < self.abort_share
                count = rng.randint(1, 120)
                try:
                    self._transaction(producer, rng, count, abort)
                except KafkaException as exc:
                    self.failed_calls += 1
                    err: KafkaError = exc.args[0]
                    log.info("feed: %s; starting a new producer", err)
                    producer = None
                self._stop.wait(self.pause_s)
        except BaseException as exc:  # reported by the harness
            log.exception("chaos feed failed")
            self.error = exc
        finally:
            if producer is not None:
                producer.flush(CALL_TIMEOUT_S)

    def _transaction(self, producer: Any, rng: random.Random, count: int, abort: bool) -> None:
        producer.begin_transaction()
        fault = None
        if not abort:
            with self._lock:
                fault = self._faults.pop(0) if self._faults else None
        for i in range(count):
            n = self._next
            self._next += 1
            value = {"id": n, "fault": fault if i == 0 else None}
            producer.produce(self.topic, json.dumps(value).encode(), f"k{n % self.keys}".encode())
            producer.poll(0)
        if abort:
            # Into the log first: abort_transaction() would purge what is still queued.
            if producer.flush(CALL_TIMEOUT_S):
                raise RuntimeError("the feed could not deliver an aborted transaction's records")
            producer.abort_transaction(CALL_TIMEOUT_S)
            self.aborted_txns += 1
        else:
            try:
                producer.commit_transaction(CALL_TIMEOUT_S)
            except KafkaException:
                if fault is not None:
                    with self._lock:
                        self._faults.insert(0, fault)  # try again with a later transaction
                raise
            self.committed_txns += 1
