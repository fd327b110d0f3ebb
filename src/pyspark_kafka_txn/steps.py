"""Wall time of the steps of one operation (a write task, a commit), for the DEBUG log.

A :class:`Steps` times named steps with ``with steps("name"):`` and :meth:`Steps.log`
writes one DEBUG line with every step's milliseconds and the total. The same figures ride
on the log record as its ``steps`` attribute (a dict of step → ms, plus ``"total"``), so
that a benchmark can collect them with a logging handler instead of parsing the text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Steps"]


class Steps:
    """The steps of one operation, timed from its creation (see the module docstring)."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as step ``name`` (added to it if it ran before)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - started) * 1000

    def total_ms(self) -> float:
        """Milliseconds since the operation started."""
        return (time.perf_counter() - self._started) * 1000

    def log(self, logger: logging.Logger, what: str, *args: object) -> None:
        """One DEBUG line: ``what % args``, then each step's and the total milliseconds."""
        if not logger.isEnabledFor(logging.DEBUG):
            return
        figures = {**self.ms, "total": self.total_ms()}
        text = ", ".join(f"{name} {ms:.1f}" for name, ms in figures.items())
        logger.debug(what + " (ms: %s)", *args, text, extra={"steps": figures})
