"""What the demo and its Spark job say to each other: the job's settings and its events.

The job side (:func:`listen`, :func:`serve`) imports pyspark lazily: the demo's own
process, which only reads the events, never loads it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

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


def listen(spark: SparkSession) -> None:
    """Emit ``started``, ``progress`` and ``idle`` events for the session's queries."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's API
            emit("started", query=str(event.id), run=str(event.runId))

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802 - Spark's API
            p = event.progress
            emit(
                "progress",
                batch=p.batchId,
                rows=p.numInputRows,
                durations={k: int(v) for k, v in p.durationMs.items()},
            )

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802 - Spark's API
            emit("idle")

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 - Spark's API
            pass

    spark.streams.addListener(Progress())


def serve(spark: SparkSession, queries: StreamingQuery | Sequence[StreamingQuery]) -> int:
    """Run the queries until ``drain`` arrives on stdin or one fails; return the exit code.

    On ``drain`` each processes what is available and stops (``drained``); a failure,
    before or while draining, is reported as ``failed`` with the error (naming the query
    when there are several; the others are stopped).
    """
    several = isinstance(queries, Sequence)
    running = list(queries) if isinstance(queries, Sequence) else [queries]
    drain = threading.Event()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "drain":
                drain.set()
                return

    threading.Thread(target=commands, name="job-commands", daemon=True).start()
    while not drain.wait(0.2) and all(q.isActive for q in running):
        pass
    errors = []
    for query in running:
        error: BaseException | None
        try:
            if query.isActive and drain.is_set():
                query.processAllAvailable()
            query.stop()
            error = query.exception()
        except Exception as exc:  # noqa: BLE001 - the query failed while draining
            error = exc
        if error is not None:
            errors.append((f"query {query.id}: {error}" if several else str(error))[:3000])
    if errors:
        emit("failed", error="\n".join(errors))
        return 1
    emit("drained")
    spark.stop()
    return 0
