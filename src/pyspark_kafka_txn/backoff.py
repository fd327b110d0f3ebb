"""The one schedule for asking Kafka again: pauses that grow (double, by default) up to
a largest one, within a deadline.

Three waits use it: the protocol client's retries of a retriable error
(``ClusterClient.retrying``), the reader's wait for a leader or a topic's partitions to
become known (``reader/planning.py``) and the writer's polls of transaction listings
(``writer/open_transactions.py``). :meth:`Backoff.pauses` is the schedule;
:func:`retry` runs a call on it for the two that retry an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Backoff", "retry"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Pauses of ``first_s``, each ``factor`` times the one before, up to ``largest_s``.

    Parameters
    ----------
    first_s
        The first pause, in seconds (greater than 0).
    largest_s
        The largest pause, in seconds (at least ``first_s``).
    factor
        How much longer each pause is than the one before (at least 1; 2: doubling).
    """

    first_s: float
    largest_s: float
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.first_s <= self.largest_s or self.factor < 1:
            raise ValueError(
                f"a backoff needs 0 < first_s <= largest_s and factor >= 1, not {self!r}"
            )

    def pauses(self, deadline: float) -> Iterator[float]:
        """Yield the pause before each next attempt while that attempt would start by
        ``deadline`` (a :func:`time.monotonic` time); the caller sleeps it.

        Each pause is checked against the clock when it is asked for, so time spent in
        the attempts counts: the schedule ends at the first pause that would cross the
        deadline.
        """
        pause = self.first_s
        while time.monotonic() + pause <= deadline:
            yield pause
            pause = min(pause * self.factor, self.largest_s)


def retry(
    call: Callable[[], _T],
    retriable: Callable[[Exception], bool],
    pauses: Iterator[float],
    on_retry: Callable[[Exception, float], None] | None = None,
) -> _T:
    """``call()``, called again after each of ``pauses`` while it raises an exception
    that ``retriable`` accepts.

    Parameters
    ----------
    call
        The attempt.
    retriable
        Whether an exception ``call`` raised is worth another attempt.
    pauses
        The schedule (:meth:`Backoff.pauses`): when it ends, the last exception is raised.
    on_retry
        Told each retried exception and the pause before the next attempt (to log it).

    Returns
    -------
    object
        What the first attempt that did not raise returned.
    """
    while True:
        try:
            return call()
        except Exception as exc:
            if not retriable(exc):
                raise
            pause = next(pauses, None)
            if pause is None:
                raise
            if on_retry is not None:
                on_retry(exc, pause)
        time.sleep(pause)
