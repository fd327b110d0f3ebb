"""One SparkSession for every Spark test.

``KAFKA_TXN_SPARK`` chooses how Spark runs (the tests are the same):

* ``local`` (default): ``local[2,2]``, one JVM (a failed task is retried once);
* ``local-cluster``: ``local-cluster[2,1,1024]``, separate executor JVMs;
* ``connect``: a Spark Connect client (``SparkSession.builder.remote("local[2,2]")``).

The ``kafka_txn`` source is not registered explicitly: Spark discovers it because the
package is named ``pyspark_*`` and exposes ``DefaultSource``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

MODE = os.environ.get("KAFKA_TXN_SPARK", "local")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Python workers (foreachBatch under Spark Connect) import test helpers from here.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
    )
    builder = SparkSession.builder.appName("kafka_txn-tests")
    if MODE == "connect":
        builder = builder.remote("local[2,2]")
    elif MODE == "local-cluster":
        builder = builder.master("local-cluster[2,1,1024]")
    else:
        assert MODE == "local", f"unknown KAFKA_TXN_SPARK={MODE!r}"
        builder = builder.master("local[2,2]")
    if MODE != "connect":  # static settings a Connect client cannot change
        builder = builder.config("spark.ui.enabled", "false").config(
            "spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="spark-warehouse-")
        )
    session = (
        builder.config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    if MODE != "connect":
        session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
