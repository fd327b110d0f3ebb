"""Per-partition lag of streaming Kafka sources, read from Spark's query progress.

Each micro-batch's progress carries, for every source, the offsets the batch ended at
(``endOffset``) and the newest offsets available when it was planned (``latestOffset``:
for ``kafka_txn`` under read_committed, each partition's last stable offset). Their
difference per partition is what the query still has to read. :func:`source_lags` computes
it from one progress; :class:`LagListener` does so for every progress of every query of a
session and logs it (logger ``pyspark_kafka_txn.monitoring``), warning when a source's
total lag passes a threshold.

The offsets of Spark's built-in ``format("kafka")`` source have the same JSON shape, so both
are reported. A source without ``latestOffset`` in its progress (before PySpark 4.2 it is
the batch's end, see the Compatibility page) shows a lag of zero.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from pyspark_kafka_txn.offsets import ORIGIN
from pyspark_kafka_txn.wire import TopicPartition

__all__ = ["LagListener", "SourceLag", "source_lags"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SourceLag:
    """What one Kafka source of a query still had to read after one micro-batch.

    Attributes
    ----------
    query_id, run_id
        The query's id (stable across restarts) and this run's id.
    name
        The query's name, or None.
    batch_id
        The micro-batch the progress reports.
    source
        The source's description in the progress (for ``kafka_txn``, Spark's name of its
        Python stream; the topics are those of :attr:`lag`).
    lag
        Offsets still to read, per (topic, partition): ``latestOffset - endOffset``, never
        below zero.
    """

    query_id: str
    run_id: str
    name: str | None
    batch_id: int
    source: str
    lag: Mapping[TopicPartition, int]

    @property
    def total(self) -> int:
        """The lag summed over the source's partitions."""
        return sum(self.lag.values())


def _partition_offsets(value: Any) -> dict[TopicPartition, int] | None:
    """``{"topic": {"0": 5}}`` (JSON text or parsed) as {(topic, 0): 5}; None otherwise."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    out: dict[TopicPartition, int] = {}
    for topic, partitions in value.items():
        if topic == ORIGIN:
            continue
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if not str(partition).lstrip("-").isdigit() or not isinstance(offset, int):
                return None
            out[TopicPartition(str(topic), int(partition))] = offset
    return out


def _field(obj: Any, name: str) -> Any:
    """A progress field, whether the progress is a dict or PySpark's progress object."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def source_lags(progress: Any) -> list[SourceLag]:
    """The lag of each Kafka source of one query progress.

    Parameters
    ----------
    progress
        ``query.lastProgress``, an element of ``query.recentProgress``, or the
        ``progress`` of a listener's ``QueryProgressEvent``.

    Returns
    -------
    list[SourceLag]
        One entry per source whose offsets have Kafka's shape, in the progress's order.
    """
    out = []
    for source in _field(progress, "sources") or ():
        end = _partition_offsets(_field(source, "endOffset"))
        if end is None:
            continue
        latest = _partition_offsets(_field(source, "latestOffset")) or {}
        lag = {tp: max(latest.get(tp, offset) - offset, 0) for tp, offset in end.items()}
        lag.update({tp: offset for tp, offset in latest.items() if tp not in end})
        out.append(
            SourceLag(
                query_id=str(_field(progress, "id")),
                run_id=str(_field(progress, "runId")),
                name=_field(progress, "name"),
                batch_id=int(_field(progress, "batchId")),
                source=str(_field(source, "description")),
                lag=dict(sorted(lag.items())),
            )
        )
    return out


class LagListener(StreamingQueryListener):
    """Logs the lag of every Kafka source after each micro-batch; warns past a threshold.

    Add it to a session with ``spark.streams.addListener(LagListener(warn_above=100_000))``.
    Each progress logs one INFO line per Kafka source (its total lag and the partitions
    lagging most), and a WARNING when the total passes ``warn_above``. :attr:`latest` keeps
    the last :class:`SourceLag` of each (query id, source), for dashboards and tests.

    Parameters
    ----------
    warn_above
        Total lag of one source (in offsets) above which a WARNING is logged; None never
        warns.
    on_lag
        Called with each :class:`SourceLag` (e.g. to export it as a metric); an exception
        it raises is logged, never passed to Spark.
    """

    def __init__(
        self,
        warn_above: int | None = None,
        on_lag: Callable[[SourceLag], None] | None = None,
    ) -> None:
        super().__init__()
        self.warn_above = warn_above
        self.on_lag = on_lag
        self.latest: dict[tuple[str, str], SourceLag] = {}

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's name)
        """Nothing to report before the first progress."""

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802 (Spark's name)
        """An idle trigger has no batch: the last lag stands."""

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 (Spark's name)
        """A stopped query keeps its last lag in :attr:`latest`."""

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802 (Spark's name)
        """Record, log and pass on the lag of each Kafka source of this progress."""
        for lag in source_lags(event.progress):
            self.latest[(lag.query_id, lag.source)] = lag
            worst = sorted(lag.lag.items(), key=lambda item: -item[1])[:3]
            text = ", ".join(f"{t}-{p}: {n}" for (t, p), n in worst if n)
            label = lag.name or lag.query_id
            topics = ",".join(sorted({t for t, _ in lag.lag}))
            if self.warn_above is not None and lag.total > self.warn_above:
                logger.warning(
                    "query %s, batch %d: %s is %d offsets behind (more than %d): %s",
                    label, lag.batch_id, topics, lag.total, self.warn_above, text,
                )  # fmt: skip
            else:
                logger.info(
                    "query %s, batch %d: %s is %d offsets behind%s",
                    label, lag.batch_id, topics, lag.total, f" ({text})" if text else "",
                )  # fmt: skip
            if self.on_lag is not None:
                try:
                    self.on_lag(lag)
                except Exception:
                    logger.exception("on_lag failed for query %s", label)
