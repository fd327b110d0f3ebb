"""What the demo and its Spark job say to each other: the job's settings and its events."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

#: Prefix of every event line on the job's stdout (anything else there is Spark's).
EVENT = '{"event"'


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What the demo tells the job (its one argument, as JSON)."""

    bootstrap: str
    input_topic: str
    output_topic: str
    checkpoint: str
    transactional_id_prefix: str
    #: Where the failing task leaves a file, so the demo can tell it happened.
    marker_dir: str
    trigger: str = "500 milliseconds"

    def to_json(self) -> str:
        """The settings as the job's argument."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobSettings:
        """The settings from the job's argument."""
        return cls(**json.loads(text))


_emit_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """One event line on stdout: ``{"event": ..., "at": wall time, ...}``."""
    line = json.dumps({"event": event, "at": time.time(), **fields})
    with _emit_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
