"""The schedule every wait that asks Kafka again shares (:mod:`pyspark_kafka_txn.backoff`).

What its three users rely on: pauses double up to the largest, the schedule ends before
the first pause that would cross the deadline (time spent in the attempts counts), and
:func:`retry` raises at once what is not retriable and the last error when the schedule
ends. The waits themselves are tested against brokers: the client's retries in
``tests/client/test_faults.py``, the reader's wait for leaders in
``tests/reader/test_reader_driver.py``, the writer's listings in ``tests/writer``.
"""

from __future__ import annotations

import itertools
import time

import pytest

from pyspark_kafka_txn.backoff import Backoff, retry


def test_pauses_double_up_to_the_largest() -> None:
    far = time.monotonic() + 3600
    assert list(itertools.islice(Backoff(0.05, 1.0).pauses(far), 8)) == [
        0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0,
    ]  # fmt: skip


def test_the_schedule_ends_before_a_pause_that_would_cross_the_deadline() -> None:
    # Seconds of margin, so that a loaded machine's pause between the lines cannot matter:
    # 10 and 20 fit from now; 40 would not, whenever it is asked for.
    pauses = list(Backoff(10, 1000).pauses(time.monotonic() + 35))
    assert pauses == [10, 20]


def test_time_spent_in_the_attempts_counts() -> None:
    pauses = Backoff(0.01, 0.01).pauses(time.monotonic() + 1)
    assert next(pauses) == 0.01
    time.sleep(1.1)  # an attempt that took longer than the whole budget
    assert next(pauses, None) is None


def test_a_past_deadline_has_no_pauses() -> None:
    assert list(Backoff(0.01, 0.1).pauses(time.monotonic() - 1)) == []


def test_pauses_grow_by_the_factor() -> None:
    far = time.monotonic() + 3600
    pauses = list(itertools.islice(Backoff(0.001, 0.004, factor=1.5).pauses(far), 6))
    assert pauses == pytest.approx([0.001, 0.0015, 0.00225, 0.003375, 0.004, 0.004])


@pytest.mark.parametrize(
    ("first", "largest", "factor"), [(0, 1, 2), (-1, 1, 2), (2, 1, 2), (0.1, 1, 0.5)]
)
def test_a_backoff_that_cannot_pause_is_refused(
    first: float, largest: float, factor: float
) -> None:
    with pytest.raises(ValueError, match="first_s <= largest_s and factor >= 1"):
        Backoff(first, largest, factor)


class FlakyError(Exception):
    pass


def test_retry_calls_again_until_the_call_succeeds() -> None:
    calls: list[int] = []
    told: list[tuple[str, float]] = []

    def call() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise FlakyError(f"attempt {len(calls)}")
        return "done"

    result = retry(
        call,
        lambda exc: isinstance(exc, FlakyError),
        Backoff(0.001, 0.002).pauses(time.monotonic() + 3600),
        lambda exc, pause: told.append((str(exc), pause)),
    )
    assert result == "done"
    assert len(calls) == 3
    assert told == [("attempt 1", 0.001), ("attempt 2", 0.002)]


def test_retry_raises_what_is_not_retriable_at_once() -> None:
    calls: list[int] = []

    def call() -> None:
        calls.append(1)
        raise KeyError("not worth another attempt")

    with pytest.raises(KeyError):
        retry(call, lambda exc: isinstance(exc, FlakyError), Backoff(0.001, 0.001).pauses(1e12))
    assert len(calls) == 1


def test_retry_raises_the_last_error_when_the_schedule_ends() -> None:
    calls: list[int] = []

    def call() -> None:
        calls.append(1)
        raise FlakyError(f"attempt {len(calls)}")

    with pytest.raises(FlakyError, match="attempt 4"):
        retry(call, lambda exc: True, iter([0.001, 0.001, 0.001]))
    assert len(calls) == 4
