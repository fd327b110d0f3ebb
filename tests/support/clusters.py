"""Embedded clusters that fail the test when the broker hit an internal error.

An internal error is an exception in a request handler or a state machine of the embedded
broker (``Cluster.internal_errors``): the client gets an error code or a closed connection,
and a test that expects a failure can pass for the wrong reason. The session's cluster is
checked after every test (``tests/conftest.py``); every cluster a module or a test starts
for itself is a :class:`CheckedKafka`, checked when its ``with`` block ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark_kafka_txn.embedded import EmbeddedKafka
from pyspark_kafka_txn.embedded.cluster import Cluster


def take_internal_errors(kafka: EmbeddedKafka) -> list[str]:
    """The internal errors the running cluster recorded since the last call (and forget
    them, so that the next check sees only new ones)."""

    def take(cluster: Cluster) -> list[str]:
        errors = list(cluster.internal_errors)
        cluster.internal_errors.clear()
        return errors

    return kafka.call(take)


def assert_no_internal_errors(kafka: EmbeddedKafka) -> None:
    """Fail if the running cluster recorded an internal error since the last check."""
    errors = take_internal_errors(kafka)
    assert not errors, f"embedded broker internal errors: {errors}"


class CheckedKafka(EmbeddedKafka):
    """An :class:`EmbeddedKafka` whose internal errors fail the test at the end of its
    ``with`` block (not when the block raised: that failure is the one to read).

    Errors are gathered at every stop, so a :meth:`restart` (which starts a new
    ``Cluster`` with an empty list) loses none.
    """

    def __init__(
        self, brokers: int = 1, data_dir: str | Path | None = None, **settings: Any
    ) -> None:
        super().__init__(brokers, data_dir, **settings)
        #: Internal errors of the runs stopped so far.
        self.internal_errors: list[str] = []

    def stop(self) -> None:
        try:
            cluster: Cluster | None = self.cluster
        except RuntimeError:  # never started
            cluster = None
        super().stop()
        if cluster is not None:  # the broker thread has ended: nothing else touches it
            self.internal_errors.extend(cluster.internal_errors)
            cluster.internal_errors.clear()

    def __enter__(self) -> CheckedKafka:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if exc[0] is None:
            assert not self.internal_errors, (
                f"embedded broker internal errors: {self.internal_errors}"
            )
