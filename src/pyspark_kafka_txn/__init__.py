"""pyspark-kafka-txn: Kafka transactions (KIP-98) for PySpark Structured Streaming.

Importing the package is cheap: nothing here imports pyspark or starts anything.
``DefaultSource`` / ``KafkaTxnDataSource`` (the ``kafka_txn`` data source) are loaded on
first access; Spark auto-registers ``DefaultSource`` of modules named ``pyspark_*``.
:func:`register` registers the source explicitly, where that discovery cannot see it.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from pyspark_kafka_txn._version import __version__

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyspark_kafka_txn.source import KafkaTxnDataSource

    DefaultSource = KafkaTxnDataSource

__all__ = ["DefaultSource", "KafkaTxnDataSource", "__version__", "register"]

logger = logging.getLogger(__name__)

#: The error condition of Spark 4.0's refusal to register a data source under the name of
#: one it discovered itself (``pyspark_*`` modules exposing ``DefaultSource``); Spark 4.1
#: lets a registration replace it instead (SPARK-51919).
_ALREADY_EXISTS = "DATA_SOURCE_ALREADY_EXISTS"

#: Sessions this process has registered the source with: calling again does not ask Spark
#: again (Spark 4.1+ would replace the registration and log a warning each time).
_registered: weakref.WeakSet[Any] = weakref.WeakSet()


def register(spark: SparkSession) -> bool:
    """Register the ``kafka_txn`` data source with ``spark``; safe to call again.

    Spark finds the source by itself when the package is installed before the Spark driver
    starts. Call this where it cannot: after ``%pip install`` into a running cluster (and
    ``dbutils.library.restartPython()``), or from a Spark Connect client (the source itself
    must still be installed on the server).

    Call it also at the start of every Python thread other than the main one that writes
    with ``kafka_txn`` (a thread pool's worker): each call makes ``spark`` the active
    session of the calling thread in Spark's JVM, without which Spark cannot find the
    source for a write from that thread (``DATA_SOURCE_NOT_FOUND``).

    Parameters
    ----------
    spark : SparkSession
        A classic or a Spark Connect session.

    Returns
    -------
    bool
        ``True`` if this call registered the source. ``False`` if it was registered
        already: by an earlier call with the same session, or by Spark's own discovery
        on a Spark that refuses to replace it (Spark 4.0 raises
        ``DATA_SOURCE_ALREADY_EXISTS``, which is taken as "already registered"; Spark 4.1
        and later replace it with the same class).

    Raises
    ------
    pyspark.errors.AnalysisException
        Any other refusal by Spark.
    """
    _activate(spark)
    if spark in _registered:
        return False
    from pyspark.errors import AnalysisException

    from pyspark_kafka_txn.source import KafkaTxnDataSource

    try:
        spark.dataSource.register(KafkaTxnDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != _ALREADY_EXISTS:
            raise
        logger.debug("kafka_txn is already registered (discovered by Spark); nothing to do")
        _registered.add(spark)
        return False
    logger.debug("registered the kafka_txn data source")
    _registered.add(spark)
    return True


def _activate(spark: SparkSession) -> None:
    """Make ``spark`` the JVM's active session of the calling thread (classic Spark only).

    Spark looks a Python data source's name up in the *active* session of the JVM thread
    that runs the call, before any code of this package runs; PySpark gives each Python
    thread a JVM thread of its own, whose active session is unset until something in that
    thread sets it (``spark.createDataFrame`` does; ``SparkSession.builder.getOrCreate()``
    does not). A ``df.write`` or ``df.writeStream`` of ``kafka_txn`` from such a thread then
    fails with ``DATA_SOURCE_NOT_FOUND``. A Spark Connect session has no JVM here: the
    server sets the session for every request.
    """
    jsession = getattr(spark, "_jsparkSession", None)
    jvm = getattr(spark, "_jvm", None)
    if jsession is None or jvm is None:
        return
    jvm.SparkSession.setActiveSession(jsession)
    logger.debug("made the session active in this thread's JVM counterpart")


def __getattr__(name: str) -> Any:
    if name in {"DefaultSource", "KafkaTxnDataSource"}:
        from pyspark_kafka_txn.source import KafkaTxnDataSource

        return KafkaTxnDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
