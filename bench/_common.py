"""Pieces the benchmark scripts share: the broker subprocess and tuned consumer settings."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

# A read_committed consumer tuned for throughput, as a user tuning librdkafka would set it.
FAST_CONSUMER_SETTINGS: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,
    "fetch.wait.max.ms": 100,
    # librdkafka pauses a partition for fetch.queue.backoff.ms once its prefetch queue
    # holds queued.min.messages; with the defaults (100k / 1000 ms) the read rate is set
    # by that pause, not by the broker.
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 1_048_576,
    "fetch.queue.backoff.ms": 0,
}


@contextlib.contextmanager
def broker_process(*args: str) -> Iterator[tuple[str, int]]:
    """Run ``python -m pyspark_kafka_txn broker --port 0 ARGS``; yield (bootstrap, pid)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyspark_kafka_txn", "broker", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.startswith("bootstrap.servers="):
            raise RuntimeError(f"broker did not start: {line!r}")
        yield line.split("=", 1)[1], proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
