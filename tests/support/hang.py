"""Hang detectors: bounds on waits that only a hang reaches, never timing assertions, and
the one polling wait (:func:`wait_until`) that applies them.

Every wait of a test ends before pytest's per-test timeout (``--timeout`` in
pyproject.toml, or the test's own ``timeout`` mark), so that a hang fails with the wait's
message, which says what never happened, not with pytest's dump of every thread's stack.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: pytest's per-test timeout (``--timeout`` in pyproject.toml's ``addopts``).
TEST_TIMEOUT_S = 300.0
#: A wait for one event (a marker written, a record visible, a member removed).
HANG_S = 60.0
#: A wait for a whole Spark job or a child process: well inside :data:`TEST_TIMEOUT_S`,
#: with time left for the test's set-up and its checks afterwards.
LONG_HANG_S = 240.0


def wait_until(
    what: str, probe: Callable[[], T | None], timeout_s: float = HANG_S, poll_s: float = 0.05
) -> T:
    """Poll ``probe`` until it returns something truthy, and return it; fail naming ``what``
    when ``timeout_s`` passes first (a hang detector, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"waited {timeout_s:g} s for {what}"
        time.sleep(poll_s)
