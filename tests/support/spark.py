"""Helpers of the Spark tests: a foreachBatch sink, and killing a query process outright (the
child jobs' own session is :func:`tests.jobs.common.child_session`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, Row, SparkSession


class Batches:
    """A foreachBatch sink keeping every micro-batch's rows with its batch id.

    Rows go to a Parquet directory so that the sink also works where foreachBatch runs
    in a separate Python process (Spark Connect).
    """

    def __init__(self, spark: SparkSession, path: Path) -> None:
        self.spark = spark
        self.path = str(path)

    def sink(self) -> Callable[[DataFrame, int], None]:
        path = self.path

        def write(df: DataFrame, batch_id: int) -> None:
            from pyspark.sql.functions import lit

            df.withColumn("batch_id", lit(batch_id)).write.mode("append").parquet(path)

        return write

    @property
    def rows(self) -> dict[int, list[Row]]:
        if not Path(self.path).exists():
            return {}
        out: dict[int, list[Row]] = {}
        for row in self.spark.read.parquet(self.path).collect():
            out.setdefault(row.batch_id, []).append(
                Row(**{k: v for k, v in row.asDict().items() if k != "batch_id"})
            )
        return out

    def all_rows(self) -> list[Row]:
        rows = self.rows
        return [r for b in sorted(rows) for r in rows[b]]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Spark's Python daemon and workers leave its group)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_everything(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the query process, its JVM and every Python worker at once."""
    victims = descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(30)
