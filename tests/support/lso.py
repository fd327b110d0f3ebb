"""The last stable offset (LSO) against the high watermark, as librdkafka sees them.

The one place that waits for markers (LSO = HWM) or checks that nothing pins the LSO. Tests
that read through another client on purpose (aiokafka, the Java client) keep their own
check through that client.
"""

from __future__ import annotations

import time
from typing import Any

from tests.support.clients import watermarks
from tests.support.hang import HANG_S


def pinned_partitions(
    bootstrap: str, topic: str, partitions: int, **extra: Any
) -> dict[int, tuple[tuple[int, int], tuple[int, int]]]:
    """Partitions whose LSO is below the high watermark (an open transaction pins it):
    partition -> (read_committed, read_uncommitted) watermarks. ``extra``: more librdkafka
    settings (a secured cluster's)."""
    out: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}
    for p in range(partitions):
        committed = watermarks(bootstrap, topic, p, "read_committed", **extra)
        uncommitted = watermarks(bootstrap, topic, p, "read_uncommitted", **extra)
        if committed != uncommitted:
            out[p] = (committed, uncommitted)
    return out


def assert_nothing_open(bootstrap: str, topic: str, partitions: int, **extra: Any) -> None:
    """No open transaction pins the LSO of any partition of ``topic``."""
    pinned = pinned_partitions(bootstrap, topic, partitions, **extra)
    assert not pinned, f"{topic}: LSO pinned (read_committed vs uncommitted): {pinned}"


def wait_lso_at_hwm(bootstrap: str, topic: str, partitions: int, timeout_s: float = HANG_S) -> None:
    """Wait until no transaction pins the LSO of any partition of ``topic``: the LSO is
    at the high watermark (EndTxn returns before the markers are written)."""
    deadline = time.monotonic() + timeout_s
    while pinned_partitions(bootstrap, topic, partitions):
        assert time.monotonic() < deadline, "LSO did not reach the high watermark"
        time.sleep(0.05)


def lso(bootstrap: str, topic: str, partition: int, **extra: Any) -> int:
    """The last stable offset of one partition, as librdkafka's read_committed
    ListOffsets reports it."""
    return watermarks(bootstrap, topic, partition, "read_committed", **extra)[1]
