"""On-disk state of the embedded cluster (when it is given a data directory).

Layout::

    DATA_DIR/meta.json                    topics (ids, partition counts, configs, log starts)
    DATA_DIR/logs/<topic>-<p>.log         record batches exactly as stored (offsets stamped)
    DATA_DIR/__transaction_state.jsonl    transaction coordinator records
    DATA_DIR/__consumer_offsets.jsonl     group offset records

Every append is one unbuffered ``write`` system call, so the state survives ``kill -9``
of the process (not a power cut: there is no fsync, as for Kafka's default flush policy).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


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
        path = self.root / f"{name}.jsonl"
        if not path.exists():
            return []
        # The last element is "" after a complete line, or a torn line (the process was
        # killed mid-write): dropped either way, as Kafka truncates a torn log tail.
        return [line for line in path.read_text().split("\n")[:-1] if line]

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
