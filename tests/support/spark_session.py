"""One SparkSession for every Spark test, whatever its folder: a pytest plugin that
``tests/conftest.py`` lists in ``pytest_plugins``.

Every test that uses the ``spark`` fixture gets the ``spark`` marker at collection, which
``make test``'s Spark legs select (``-m spark``; tests/README.md). A module that belongs to
those legs without a session (it drives the data source's classes as Spark does) carries
the marker itself. Nothing here imports PySpark or starts a session unless a collected
test uses the fixture.

``KAFKA_TXN_SPARK`` chooses how Spark runs (the tests are the same):

* ``local`` (default): ``local[2,2]``, one JVM (a failed task is retried once);
* ``local-cluster``: ``local-cluster[2,1,1024]``, separate executor JVMs;
* ``connect``: a Spark Connect client (``SparkSession.builder.remote("local[2,2]")``);
* ``connect-cluster``: a Spark Connect client of a server whose executors are separate
  JVMs (``remote("local-cluster[2,1,1024]")``): ``make test`` runs the Spark tests again
  in this mode once, which covers what the two modes above add to ``local``.

The ``kafka_txn`` source is not registered explicitly: Spark discovers it because the
package is named ``pyspark_*`` and exposes ``DefaultSource``.

A test marked ``local_spark_only(reason)`` runs in the ``local`` mode only (``make test``
runs it once); the other modes deselect it, never skip it.

When a collected test uses the ``builtin_kafka`` fixture (the parity tests), the session also
loads Spark's built-in Kafka connector through ``spark.jars``
(:mod:`tests.support.spark_kafka`); otherwise it does not, so the other tests never need it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MODE = os.environ.get("KAFKA_TXN_SPARK", "local")
#: Each mode's master, and whether the session is a Spark Connect client of it.
_MODES = {
    "local": ("local[2,2]", False),
    "local-cluster": ("local-cluster[2,1,1024]", False),
    "connect": ("local[2,2]", True),
    "connect-cluster": ("local-cluster[2,1,1024]", True),
}
ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "spark_session: given at collection to every test that uses the spark fixture "
        "(a module's own spark marker does not give it): the tests whose outcome can depend "
        "on the Spark mode, which make test runs again through Spark Connect",
    )
    config.addinivalue_line(
        "markers",
        "local_spark_only(reason): runs with KAFKA_TXN_SPARK=local only (once per make "
        "test); deselected in every other mode",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of the ``spark`` fixture ``spark`` and ``spark_session`` (before
    ``-m`` selects), then, outside the ``local`` mode, deselect the tests marked
    ``local_spark_only``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.spark_session)
    if MODE == "local":
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (keep if item.get_closest_marker("local_spark_only") is None else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if "tests.support.spark_kafka" not in sys.modules:
        return  # no test of this session loaded Spark's built-in connector
    from tests.support.spark_kafka import LOADED

    for connector in LOADED:
        terminalreporter.write_line(connector.note)


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Python workers (foreachBatch under Spark Connect) import test helpers from here.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
    )
    assert MODE in _MODES, f"unknown KAFKA_TXN_SPARK={MODE!r}"
    master, connect = _MODES[MODE]
    builder = SparkSession.builder.appName("kafka_txn-tests")
    builder = builder.remote(master) if connect else builder.master(master)
    if not connect:  # static settings a Connect client cannot change
        builder = builder.config("spark.ui.enabled", "false").config(
            "spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="spark-warehouse-")
        )
        if any("builtin_kafka" in getattr(i, "fixturenames", ()) for i in request.session.items):
            from tests.support.spark_kafka import connector

            builder = builder.config("spark.jars", connector().spark_jars)
    session = (
        builder.config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    if not connect:
        session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
