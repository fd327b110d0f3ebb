"""On-disk state of the embedded cluster (when it is given a data directory).

Layout::

    DATA_DIR/meta.json                    topics (ids, partition counts, configs, log starts,
                                          leaders, leader epochs), moved coordinators
    DATA_DIR/logs/<topic>-<p>.log         record batches exactly as stored (offsets stamped)
    DATA_DIR/__transaction_state.jsonl    transaction coordinator records
    DATA_DIR/__consumer_offsets.jsonl     group offset records

Every append is one unbuffered ``write`` system call, so the state survives ``kill -9``
of the process (not a power cut: there is no fsync, as for Kafka's default flush policy).
On recovery a torn tail (a batch or line cut short by the kill) is truncated away, and
producer state, open transactions and the aborted-transaction index are rebuilt from
the partition logs (:meth:`~pyspark_kafka_txn.embedded.log.PartitionLog.load`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

logger = logging.getLogger(__name__)


class Storage:
    """Append-only files under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "logs").mkdir(parents=True, exist_ok=True)
        self._files: dict[Path, BinaryIO] = {}

    def _appender(self, path: Path) -> BinaryIO:
        handle = self._files.get(path)
        if handle is None:
            handle = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open for appends
            self._files[path] = handle
        return handle

    def _partition_path(self, topic: str, partition: int) -> Path:
        return self.root / "logs" / f"{topic}-{partition}.log"

    # --- metadata -----------------------------------------------------------------

    def load_meta(self) -> dict[str, Any] | None:
        path = self.root / "meta.json"
        if not path.exists():
            return None
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def save_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.root / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=1, sort_keys=True))
        os.replace(tmp, self.root / "meta.json")

    # --- partition logs -----------------------------------------------------------

    def partition_sink(self, topic: str, partition: int) -> Callable[[bytes], None]:
        handle = self._appender(self._partition_path(topic, partition))
        return handle.write  # type: ignore[return-value]

    def read_partition(self, topic: str, partition: int) -> bytes:
        path = self._partition_path(topic, partition)
        return path.read_bytes() if path.exists() else b""

    def truncate_partition(self, topic: str, partition: int, size: int) -> None:
        """Cut a partition file back to its first ``size`` bytes (a torn tail)."""
        with open(self._partition_path(topic, partition), "r+b") as handle:
            handle.truncate(size)

    def delete_partition(self, topic: str, partition: int) -> None:
        path = self._partition_path(topic, partition)
        handle = self._files.pop(path, None)
        if handle is not None:
            handle.close()
        path.unlink(missing_ok=True)

    # --- line logs ----------------------------------------------------------------

    def line_sink(self, name: str) -> Callable[[str], None]:
        handle = self._appender(self.root / f"{name}.jsonl")

        def write(line: str) -> None:
            handle.write((line + "\n").encode())

        return write

    def read_lines(self, name: str) -> list[str]:
        """The complete lines of a line log; a torn last line is cut off the file.

        A line without its newline was being written when the process died: it is
        dropped and truncated away (as Kafka truncates a torn log tail), so that the
        next append starts a fresh line instead of extending the torn one.
        """
        path = self.root / f"{name}.jsonl"
        if not path.exists():
            return []
        data = path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            logger.warning(
                "truncating a torn line of %d bytes at the end of %s", len(data) - complete, path
            )
            with open(path, "r+b") as handle:
                handle.truncate(complete)
        return [line for line in data[:complete].decode().split("\n") if line]

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
