"""A TransactionCoordinator with a manual clock, recorded markers and a manual scheduler."""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from pyspark_kafka_txn.embedded.txn import TransactionCoordinator

Marker = tuple[int, int, bool, list[tuple[str, int]]]


class Harness:
    """Drive one coordinator by hand: ``now`` is its clock (ms), markers are recorded in
    ``markers`` and scheduled work runs only in :meth:`run_markers`."""

    def __init__(self, tv: int = 2, start: int = 0) -> None:
        self.now = 1_000
        self.markers: list[Marker] = []
        self.scheduled: list[Callable[[], None]] = []
        self.lines: list[str] = []
        self.coord = TransactionCoordinator(
            clock_ms=lambda: self.now,
            write_markers=lambda pid, e, c, parts: self.markers.append((pid, e, c, list(parts))),
            schedule=lambda _delay, fn: self.scheduled.append(fn),
            transaction_version=tv,
            sink=self.lines.append,
            initial_producer_epoch=start,
        )

    def run_markers(self) -> None:
        while self.scheduled:
            self.scheduled.pop(0)()

    def init(
        self, tid: str = "x", timeout: int = 60_000, *, expected: tuple[int, int] = (-1, -1)
    ) -> tuple[int, int]:
        """InitProducerId that must succeed: ``(producer id, epoch)``."""
        r = self.coord.init_producer_id(tid, timeout, *expected)
        assert r.error is ErrorCode.none, r
        return r.producer_id, r.epoch
