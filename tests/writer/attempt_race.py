"""A ``kafka_txn`` writer whose two attempts of Spark partition 0 meet in a chosen order.

The race of ``test_failed_attempt_writer_cannot_fence_its_retry``
(``tests/writer/test_writer_attempts.py``): attempt 0 of a task fails upstream of the
writer before any row reaches it, while its Python writer process, which Spark does not
wait for, is still on its way; the retry (attempt 1) starts. Which of the two writers
claims the transactional id first is up to the scheduler, so this writer fixes the order
with files (every Spark process runs on this machine, in every Spark mode):

* attempt 0 waits, before the product's ``write()``, until the retry's writer has asked
  for its first input (``retry-reading``), then runs the product's ``write()`` and records
  how it ended (``first-done``);
* attempt 1 runs the product's ``write()`` on its input held back at the first batch:
  the first time the product asks for input the file ``retry-reading`` is made, and the
  input flows once attempt 0's writer has ended.

So the slow writer of attempt 0 runs the whole product ``write()`` while the retry is
held at its first read of input: a writer that claims its id before it reads (InitProducerId
first) has the retry claim the id first and attempt 0 claim it after, fencing the retry.
The product's writer is used as it is (wrapped, not changed); every writer records
``entered-<partition>-<attempt>`` (its process id) so the test counts the attempts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pyspark_kafka_txn.client.admin import describe_transactions
from pyspark_kafka_txn.client.metadata import ClusterClient
from pyspark_kafka_txn.errors import KafkaTxnError
from pyspark_kafka_txn.source import KafkaTxnDataSource
from pyspark_kafka_txn.spark_api import BatchWriterBase
from pyspark_kafka_txn.writer.ids import transactional_id
from pyspark_kafka_txn.writer.sink import KafkaBatchWriter
from tests.support.hang import LONG_HANG_S

__all__ = ["FIRST_DONE", "GATES_OPTION", "RETRY_READING", "AttemptRaceSource", "entered"]

#: The option naming the directory of the files (not passed on to ``kafka_txn``).
GATES_OPTION = "attemptRaceGates"
#: Made by the retry's writer when the product first asks it for input.
RETRY_READING = "retry-reading"
#: Written by attempt 0's writer when the product's ``write()`` ended: how it ended, and
#: who held partition 0's transactional id then (``"; id held by nobody"``: nobody had
#: claimed it, the retry being held before it claims it, if it reads first).
FIRST_DONE = "first-done"


def entered(gates: Path, partition: int, attempt: int) -> Path:
    """The file a writer makes when its ``write()`` starts (holding its process id)."""
    return gates / f"entered-{partition}-{attempt}"


def _wait_for(path: Path, what: str) -> None:
    deadline = time.monotonic() + LONG_HANG_S  # a hang detector, inside pytest's timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared ({what})")
        time.sleep(0.02)


class AttemptRaceSource(KafkaTxnDataSource):
    """``kafka_txn`` with the writer of this module (option :data:`GATES_OPTION`)."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``kafka_txn_attempt_race``."""
        return "kafka_txn_attempt_race"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The product's batch writer, wrapped in :class:`_RaceWriter`."""
        gates = Path(self.options[GATES_OPTION])
        rest = {k: v for k, v in self.options.items() if k.lower() != GATES_OPTION.lower()}
        inner = KafkaTxnDataSource(rest).writer(schema, overwrite)
        assert isinstance(inner, KafkaBatchWriter)
        return _RaceWriter(inner, gates)


class _RaceWriter(BatchWriterBase):
    """The product's writer; partition 0's attempts meet as the module docstring says."""

    def __init__(self, inner: KafkaBatchWriter, gates: Path) -> None:
        self.inner = inner
        self.gates = gates

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        partition, attempt = ctx.partitionId(), ctx.attemptNumber()
        entered(self.gates, partition, attempt).write_text(str(os.getpid()))
        if partition != 0:
            return self.inner.write(iterator)
        if attempt > 0:
            return self.inner.write(self._held(iterator))
        _wait_for(self.gates / RETRY_READING, "the retry's writer never asked for input")
        outcome = "still running"
        try:
            message = self.inner.write(iterator)
            outcome = f"returned {getattr(message, 'kind', message)}"
            return message
        except BaseException as exc:
            outcome = f"raised {type(exc).__name__}: {exc}"
            raise
        finally:
            (self.gates / FIRST_DONE).write_text(f"{outcome}; id held by {self._holder()}")

    def _holder(self) -> str:
        """Who holds partition 0's transactional id, as DescribeTransactions says."""
        options = self.inner.options
        tid = transactional_id(options.transactional_id_prefix, str(self.inner.job_id), 0)
        try:
            with ClusterClient(options.bootstrap_servers) as cluster:
                held = describe_transactions(cluster, [tid])[tid]
        except KafkaTxnError as exc:  # recorded for the test, which fails on it
            return f"? ({type(exc).__name__}: {exc})"
        if held is None:
            return "nobody"
        return f"producer {held.producer_id}, epoch {held.producer_epoch} ({held.state})"

    def _held(self, iterator: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``iterator``, held at its first batch until attempt 0's writer has ended."""
        (self.gates / RETRY_READING).touch()
        _wait_for(self.gates / FIRST_DONE, "attempt 0's writer never ended")
        yield from iterator

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self.inner.commit(messages)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        self.inner.abort(messages)
